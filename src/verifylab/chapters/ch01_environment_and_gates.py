"""Chapter 01, the gates: the audited version x gate matrix, which versions can run fused on a PCIe SM120 box,
the simulated-PCIe run, the SM120 build check, and ``live``: preflight, audit and (optionally) open this box's."""

from __future__ import annotations

import pandas as pd

from verifylab.chapters._base import live_section, shown_as_table
from verifylab.chapters.params import EnvironmentAndGates as Params
from verifylab.gates import apply, audit, default_root, parse_arch, verify
from verifylab.gates.preflight import box_preflight
from verifylab.report import gates_report, live_tp2
from verifylab.report.section import Prose, Section
from verifylab.store.evidence import Evidence

__all__ = ["Params"]


@shown_as_table
def gate_matrix(ev: Evidence) -> pd.DataFrame:
    """Table: gate x audited version -> closed / open / info (gate kinds in words, so the column can wrap)."""
    overview = gates_report.matrix_overview(ev.gate_matrix)
    return overview.assign(kind=overview["kind"].str.replace("_", " "))


def _outlook(ev: Evidence) -> pd.DataFrame:
    return ev.derived("pcie_sm120_outlook", lambda e: gates_report.pcie_sm120_outlook(e.gate_matrix, e.flashinfer_pins))


def pcie_sm120_finding(ev: Evidence) -> Prose:
    """Finding: the SGLang versions whose pinned FlashInfer can fuse on a PCIe SM120 box, and what to open."""
    return gates_report.pcie_sm120_finding(_outlook(ev))


@shown_as_table
def pcie_sm120_table(ev: Evidence) -> pd.DataFrame:
    """Table: per audited SGLang version, the gates to open and whether fusion can run without multicast."""
    return _outlook(ev)


def _pcie_simulation(ev: Evidence) -> pd.DataFrame:
    return ev.derived("pcie_simulation", lambda e: live_tp2.pcie_simulation(e.runs))


def pcie_simulation_finding(ev: Evidence) -> Prose:
    """Finding: the simulated-PCIe run on 2 x H200, before and after the precondition gate was opened."""
    return live_tp2.pcie_finding(_pcie_simulation(ev))


@shown_as_table
def pcie_simulation_table(ev: Evidence) -> pd.DataFrame:
    """Table: the simulated-PCIe runs, what SGLang logged and which kernels ran."""
    return _pcie_simulation(ev)


@shown_as_table
def version_findings(ev: Evidence, package: str, version: str) -> pd.DataFrame:
    """Table: every gate found in one audited version, with its note."""
    return gates_report.version_findings(ev.gate_matrix, package, version)


@shown_as_table
def sm120_build_runs(ev: Evidence) -> pd.DataFrame:
    """Table: the SM120 build checks, labelled with their machine."""
    return gates_report.sm120_build_runs(ev)


def live(params: Params, ev: Evidence) -> Section | None:
    """Live mode: preflight this box, audit its SGLang install and, with ``apply_patch``, open and verify."""
    return live_section(params, lambda: _audit_this_box(params))


def _audit_this_box(params: Params) -> Section:
    section = Section("This box (live mode)")
    root = params.sglang_root or default_root()
    section.add("Preflight", box_preflight(arch=parse_arch(params.arch)))
    section.add(f"Audit of {root}", gates_report.audit_table(audit(root, params.arch)))
    if params.apply_patch:
        result = apply(root, params.arch)
        section.add("Applied", "\n".join(result.notes) or "nothing to change")
        section.add("Verification", pd.DataFrame(verify(root, params.arch).checks))
    return section
