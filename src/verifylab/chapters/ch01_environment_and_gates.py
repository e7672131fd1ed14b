"""Chapter 01, the box and its gates: the communication regime the probes found (first: every later answer depends
on it), the audited version x gate matrix, which versions can run fused on a PCIe SM120 box and what the wheels
say about it, the simulated-PCIe run, the SM120 build check, and ``live``: probe this box's communication,
preflight, audit and (optionally) open its gates."""

from __future__ import annotations

import pandas as pd

from verifylab.analysis import comm_probe, live_tp2, verify_path
from verifylab.analysis import gates as gates_analysis
from verifylab.analysis.hardware import run_hardware_table
from verifylab.chapters._base import live_section, nothing_stored, shown_as_table
from verifylab.chapters.params import EnvironmentAndGates as Params
from verifylab.comm.config import ProbeConfig
from verifylab.derived import derived
from verifylab.errors import VerifylabError
from verifylab.gates import apply, audit, default_root, parse_arch, verify
from verifylab.gates.preflight import box_preflight
from verifylab.launch import FUSION_OFF_FLAG
from verifylab.report.section import Prose, Section
from verifylab.report.tables import Table, as_table
from verifylab.reported import reported_value
from verifylab.store.evidence import Evidence
from verifylab.store.manifest import new_run_id
from verifylab.vocab import version_key

__all__ = ["Params"]


@derived
def _probes(ev: Evidence) -> pd.DataFrame:
    return comm_probe.probe_overview(ev.runs)


def communication_finding(ev: Evidence) -> Prose:
    """Finding: the regime each stored communication probe found, with its hardware."""
    return comm_probe.probe_finding(_probes(ev))


def communication_verdicts(ev: Evidence) -> Table | Prose:
    """Table: every stored probe's verdict per world size, its hardware on a line of its own (measured)."""
    probes = _probes(ev)
    if probes.empty:
        return nothing_stored(ev, "a communication probe", "`verifylab probe` on the box measures one")
    columns = [
        "run",
        "hardware",
        "ranks",
        "nccl transport",
        "regime",
        "all-reduce, graph (µs)",
        "eager (µs)",
        "try first",
    ]
    return Table(probes[columns].round(1), spanned="hardware")


@derived
def _agreement(ev: Evidence) -> pd.DataFrame:
    return comm_probe.probe_agreement(ev.runs)


def probe_agreement_finding(ev: Evidence) -> Prose:
    """Finding: the probe's curves against the campaign's on the same machine kind."""
    return comm_probe.agreement_finding(_agreement(ev))


@shown_as_table
def probe_agreement(ev: Evidence) -> pd.DataFrame:
    """Table: the probe's NCCL curve per size against the synthetic-pass campaign's (measured)."""
    return _agreement(ev).round(2)


@shown_as_table
def run_hardware(ev: Evidence) -> pd.DataFrame:
    """Table: every measured run's hardware and software (GPU, links, driver, CUDA, NCCL, torch, SGLang,
    FlashInfer): the table every measured figure's run id points to."""
    return run_hardware_table(ev.runs)


@shown_as_table
def fusion_forensics(ev: Evidence) -> pd.DataFrame:
    """Table: per SGLang / FlashInfer pair, what the wheels say about fusion on a PCIe SM120 box (audited)."""
    f = ev.fusion_forensics
    kernels = [
        ("fused kernel excludes SM12x" if fused else "fused kernel: no SM12x guard")
        + ("; plain all-reduce: PDL off on SM12x" if plain else "")
        for fused, plain in zip(
            f["fused_kernel_excludes_sm12x"].astype(str) == "True",
            f["plain_allreduce_pdl_off_sm12x"].astype(str) == "True",
            strict=True,
        )
    ]
    return pd.DataFrame(
        {
            "sglang": f["sglang"],
            "flashinfer": f["flashinfer"] + (f["pinned"].astype(str) != "True").map({True: " (case study)", False: ""}),
            "workspace": f["workspace"],
            "JIT majors": f["jit_majors"],
            "SM12x in the kernels": kernels,
            "keeps fusion off on PCIe SM120": f["blocks_fusion_on_pcie_sm120"],
        }
    )


@shown_as_table
def gate_matrix(ev: Evidence) -> pd.DataFrame:
    """Table: each gate, its file and kind, and the audited versions where it is closed, open or absent."""
    return gates_analysis.matrix_overview(ev.gate_matrix)


def audited_versions_note(ev: Evidence) -> Prose:
    """Finding: the versions the gate matrix audited (a range in it spans only these)."""
    return gates_analysis.audited_versions_note(ev.gate_matrix, ev.fusion_forensics)


@derived
def _outlook(ev: Evidence) -> pd.DataFrame:
    return gates_analysis.pcie_sm120_outlook(ev.fusion_forensics)


def pcie_sm120_finding(ev: Evidence) -> Prose:
    """Finding: the SGLang versions whose pinned FlashInfer can fuse on a PCIe SM120 box, and what to open."""
    return gates_analysis.pcie_sm120_finding(_outlook(ev))


@shown_as_table
def pcie_sm120_table(ev: Evidence) -> pd.DataFrame:
    """Table: per audited SGLang version, the gates to open and whether fusion can run without multicast."""
    return _outlook(ev)


@derived
def _pcie_simulation(ev: Evidence) -> pd.DataFrame:
    return live_tp2.pcie_simulation(ev.runs)


def pcie_simulation_finding(ev: Evidence) -> Prose:
    """Finding: the simulated-PCIe run on 2 x H200, before and after the precondition gate was opened."""
    return live_tp2.pcie_finding(_pcie_simulation(ev))


@shown_as_table
def pcie_simulation_table(ev: Evidence) -> pd.DataFrame:
    """Table: the simulated-PCIe runs, what SGLang logged and which kernels ran."""
    return _pcie_simulation(ev)


def fusion_off_flag_note(ev: Evidence, version: str) -> Prose:
    """Finding: whether SGLang ``version`` can keep fusion off by flag, and the first audited version that can (read
    from each wheel's server options, ``data/gates/sglang_flags.csv``)."""
    flags = ev.sglang_flags if ev.has_gate_matrix else {}
    having = sorted((v for v, accepted in flags.items() if FUSION_OFF_FLAG in accepted), key=version_key)
    if not flags:
        return Prose(f"No audited server options are stored: run `verifylab gates matrix` to see {FUSION_OFF_FLAG}.")
    first = f"the first audited version that accepts it is {having[0]}" if having else "no audited version accepts it"
    has = version in flags and FUSION_OFF_FLAG in flags[version]
    baseline, fused = (reported_value(ev.figures, f) for f in ("baseline_92_6", "fusion_run_1"))
    return Prose(
        f"Note the auto-enable list: it includes `KimiK25ForConditionalGeneration`. Once this gate admits SM120, a "
        f'Kimi-K2.5 "baseline" launched without any fusion flag is fused — and SGLang {version} '
        f"{'has' if has else 'has no'} `{FUSION_OFF_FLAG}` ({first}, read from each audited wheel's server options). "
        f'The case study\'s "baseline {baseline:g} vs fusion {fused:g}" may well compare fused with fused.'
    )


VERIFY_PATH_MISSING = "No verify-path audit is stored: run `verifylab gates matrix` to read it from the wheels."


def verify_path_finding(ev: Evidence) -> Prose:
    """Finding: the attention backend an MLA model gets on SM120 in every audited SGLang, the kernel that verifies a
    chain there, what keeps the split-KV verify off, and whether FlashInfer's MLA backend is admitted (audited)."""
    return verify_path.verify_path_finding(ev.verify_path) if ev.has_verify_path else Prose(VERIFY_PATH_MISSING)


def verify_path_gates(ev: Evidence, version: str) -> Table | Prose:
    """Table: one audited SGLang version's verify path, beside its fusion gates: the default backend per model shape
    and GPU, the split-KV verify's conditions, FlashInfer MLA on SM120, the verify options (file:line each)."""
    if not ev.has_verify_path:
        return Prose(VERIFY_PATH_MISSING)
    return as_table(verify_path.verify_path_version_table(ev.verify_path, version))


@shown_as_table
def version_findings(ev: Evidence, package: str, version: str) -> pd.DataFrame:
    """Table: every gate found in one audited version, with its note."""
    return gates_analysis.version_findings(ev.gate_matrix, package, version)


@shown_as_table
def sm120_build_runs(ev: Evidence) -> pd.DataFrame:
    """Table: the SM120 build checks, labelled with their machine."""
    return gates_analysis.sm120_build_runs(ev)


def live(params: Params, ev: Evidence) -> Section | None:
    """Live mode: probe this box's communication, preflight it, audit its SGLang install and, with
    ``apply_patch``, open and verify."""
    return live_section(params, lambda: _audit_this_box(params, ev))


def _probe_this_box(params: Params, ev: Evidence, section: Section) -> None:
    """Run the communication probe on this box and store it as a run; its verdict leads the section."""
    import tempfile
    from pathlib import Path

    from verifylab.comm.probe import run_probe
    from verifylab.comm.record import store_probe

    gpus = list(range(params.probe_gpus)) if params.probe_gpus else None
    try:
        with tempfile.TemporaryDirectory(prefix="verifylab-probe-") as tmp:
            raw = run_probe(ProbeConfig(gpus=gpus), Path(tmp))
        manifest = store_probe(raw, ev.runs.root, new_run_id("comm-probe"), public=ev.public)
    except VerifylabError as exc:
        section.add("Communication probe", f"not run: {exc}")
        return
    section.add(f"Communication probe (run {manifest.run_id})", ev.runs.read_table(manifest.run_id, "verdict"))


def _audit_this_box(params: Params, ev: Evidence) -> Section:
    section = Section("This box (live mode)")
    if params.probe:
        _probe_this_box(params, ev, section)
    root = params.sglang_root or default_root()
    section.add("Preflight", box_preflight(arch=parse_arch(params.arch)))
    section.add(f"Audit of {root}", gates_analysis.audit_table(audit(root, params.arch)))
    if params.apply_patch:
        result = apply(root, params.arch)
        section.add("Applied", "\n".join(result.notes) or "nothing to change")
        section.add("Verification", pd.DataFrame(verify(root, params.arch).checks))
    return section
