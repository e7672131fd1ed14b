"""Tables for chapter 01: the version x gate matrix, one version's findings, the SM120 build check, and which
versions can run fused on a PCIe SM120 box."""

from __future__ import annotations

import pandas as pd

from verifylab.gates import Audit
from verifylab.gates.matrix import matrix_pivot
from verifylab.report.section import Prose
from verifylab.store.evidence import Evidence
from verifylab.vocab import PCIE_IPC_FLASHINFER, PCIE_IPC_SGLANG, version_at_least, version_key

PCIE_SM120_LABEL = "inferred from source and an SM90 simulation, not run on SM120"


STATUS_WORDS = {"closed": "closed", "open": "open", "info": "present (no gate)", "—": "absent"}


def version_ranges(statuses: dict[str, str]) -> str:
    """Version -> status as runs of consecutive audited versions: ``closed 0.5.8–0.5.20; absent 0.5.6, 0.5.23``
    (closed first, then open, present, absent)."""

    runs: list[tuple[str, list[str]]] = []
    for version in sorted(statuses, key=version_key):
        status = statuses[version]
        if runs and runs[-1][0] == status:
            runs[-1][1].append(version)
        else:
            runs.append((status, [version]))
    spans: dict[str, list[str]] = {}
    for status, versions in runs:
        spans.setdefault(status, []).append(versions[0] if len(versions) == 1 else f"{versions[0]}–{versions[-1]}")
    order = list(STATUS_WORDS)
    statuses_in_order = sorted(spans, key=lambda s: order.index(s) if s in order else len(order))
    return "; ".join(f"{STATUS_WORDS.get(s, s)} {', '.join(spans[s])}" for s in statuses_in_order)


def matrix_overview(matrix: pd.DataFrame) -> pd.DataFrame:
    """One row per gate: its function and file, its kind and, over the audited SGLang versions (FlashInfer's for
    FlashInfer's JIT list), where it is closed, open, present without a gate, or absent."""
    rows = []
    for package in ("sglang", "flashinfer"):
        pivot = matrix_pivot(matrix[matrix["package"] == package])
        versions = [c for c in pivot.columns if c not in ("kind", "gate")]
        for record in pivot.to_dict("records"):
            file, function = str(record["gate"]).split(" : ", 1)
            statuses = {c.split(" ", 1)[1]: str(record[c]) for c in versions}
            prefix = "FlashInfer " if package == "flashinfer" else ""
            rows.append(
                {
                    "gate (file)": f"{function} ({prefix}{file})",
                    "kind": str(record["kind"]).replace("_", " "),
                    "SM120 by audited version": prefix + version_ranges(statuses),
                }
            )
    return pd.DataFrame(rows, columns=["gate (file)", "kind", "SM120 by audited version"])


def audited_versions_note(matrix: pd.DataFrame, forensics: pd.DataFrame | None = None) -> Prose:
    """Which versions were audited: the gate matrix's (a range in it, ``0.5.6–0.5.14``, spans only those) and the
    FlashInfer wheels the fusion forensics read (each SGLang's pinned one, and the case study's)."""

    def listed(versions) -> str:
        return ", ".join(sorted({str(v) for v in versions}, key=version_key))

    def of(package: str) -> list[str]:
        return list(matrix.loc[matrix["package"] == package, "version"])

    flashinfer = f" and FlashInfer {listed(of('flashinfer'))}" if of("flashinfer") else ""
    read = ""
    if forensics is not None and not forensics.empty:
        read = f" The fusion forensics also read FlashInfer {listed(forensics['flashinfer'])} (each SGLang's pin)."
    return Prose(
        f"Audited: SGLang {listed(of('sglang'))}{flashinfer}. A range in the last column spans only these versions."
        + read
    )


def version_findings(matrix: pd.DataFrame, package: str, version: str) -> pd.DataFrame:
    """Every finding of one audited version, with its note."""
    rows = matrix[(matrix["package"] == package) & (matrix["version"].astype(str) == version)]
    return rows[["file", "line", "function", "kind", "status", "expression", "note"]].reset_index(drop=True)


def audit_table(audit: Audit) -> pd.DataFrame:
    """A live audit as a table."""
    return pd.DataFrame([f.to_dict() for f in audit.findings]).drop(columns=["archs"])


def sm120_build_runs(ev: Evidence) -> pd.DataFrame:
    """The SM120 build checks stored as measured runs, labelled with their machine."""
    store = ev.runs
    frames = []
    for run_id in store.runs_with_table("sm120_build"):
        frame = store.read_table(run_id, "sm120_build")
        frame.insert(0, "run", run_id)
        frame["machine"] = store.manifest(run_id).label
        frames.append(frame)
    return pd.concat(frames, ignore_index=True).fillna("") if frames else pd.DataFrame()


def pcie_sm120_outlook(forensics: pd.DataFrame) -> pd.DataFrame:
    """Per audited SGLang version, with the FlashInfer it pins: what a PCIe SM120 box must open for the all-reduce
    fusion to run, and whether it can run at all, from the wheels' own source (``fusion_forensics.csv``)."""

    pinned = forensics[forensics["pinned"].astype(str) == "True"]
    rows = []
    for r in sorted(pinned.itertuples(), key=lambda r: version_key(str(r.sglang))):
        multicast = "needs NVLink multicast" in str(r.blocks_fusion_on_pcie_sm120) or (
            "NVLink multicast" in str(r.workspace) and "no multicast" not in str(r.workspace)
        )
        to_open = [f"{r.sglang_arch_gates_closed} SGLang arch gate(s)"]
        if str(r.jit_admits_sm12x) != "True":
            to_open.append(f"FlashInfer's JIT arch list ({r.jit_majors})")
        if str(r.multicast_preflight) == "True":
            to_open.append("the multicast-preflight precondition")
        if multicast:
            verdict = "not with the pinned FlashInfer: its workspace needs NVLink multicast"
        elif str(r.jit_admits_sm12x) == "True":
            verdict = "fused after verifylab gates apply --arch sm120"
        else:
            verdict = "fused after verifylab gates apply --arch sm120 (SM12x experimental in this FlashInfer)"
        rows.append(
            {
                "sglang": str(r.sglang),
                "flashinfer (pinned)": str(r.flashinfer),
                "workspace": str(r.workspace),
                "workspace preflight": "yes" if str(r.multicast_preflight) == "True" else "no",
                "to open": ", ".join(to_open),
                "PCIe SM120": verdict,
                "provenance": PCIE_SM120_LABEL,
            }
        )
    return pd.DataFrame(rows).set_index("sglang")


def upgrade_target(outlook: pd.DataFrame) -> tuple[str, str] | None:
    """The one upgrade the book names, (sglang, flashinfer): the first audited SGLang whose pinned FlashInfer fuses
    on a PCIe SM120 box without opening FlashInfer itself and that runs SGLang's PCIe-IPC all-reduce (the stack an
    owner can launch today where P2P works); the first that fuses where none does both."""
    ready = [
        v for v, verdict in outlook["PCIe SM120"].items() if verdict == "fused after verifylab gates apply --arch sm120"
    ]
    both = [
        v
        for v in ready
        if version_at_least(v, PCIE_IPC_SGLANG)
        and version_at_least(str(outlook.loc[v, "flashinfer (pinned)"]), PCIE_IPC_FLASHINFER)
    ]
    chosen = both or ready
    return (chosen[0], str(outlook.loc[chosen[0], "flashinfer (pinned)"])) if chosen else None


def pcie_sm120_finding(outlook: pd.DataFrame) -> Prose:
    """Which versions run fused on a PCIe SM120 box, in one sentence formatted from the outlook table."""
    fused = [v for v, verdict in outlook["PCIe SM120"].items() if verdict.startswith("fused")]
    blocked = [v for v, verdict in outlook["PCIe SM120"].items() if verdict.startswith("not")]
    target = upgrade_target(outlook)
    if not fused:
        return Prose(
            f"No audited SGLang version runs fused on a PCIe SM120 box with its pinned FlashInfer ({PCIE_SM120_LABEL})."
        )
    text = (
        f"**Upgrade target: SGLang {target[0]} with its pinned FlashInfer {target[1]}**, the first audited pair whose "
        "FlashInfer builds its fusion module for SM12x as published and allocates the workspace without NVLink "
        "multicast"
        + (
            f" and that runs SGLang's PCIe-IPC all-reduce (SGLang {PCIE_IPC_SGLANG}+ with FlashInfer "
            f"{PCIE_IPC_FLASHINFER}+)"
            if version_at_least(target[0], PCIE_IPC_SGLANG)
            else ""
        )
        + "; `verifylab gates apply --arch sm120` then opens SGLang's arch gates and its multicast preflight. "
        if target
        else ""
    )
    experimental = [v for v in fused if "experimental" in outlook.loc[v, "PCIe SM120"]]
    text += (
        f"Older versions ({', '.join(experimental)}) fuse only once FlashInfer's JIT list is opened too "
        "(experimental on SM12x)"
        if experimental
        else ""
    )
    if blocked:
        text += (
            f"; {', '.join(blocked)} pin a FlashInfer whose workspace needs NVLink multicast and cannot fuse on PCIe"
        )
    return Prose(
        text + ". All of them need working peer-to-peer access: the fused kernel writes into its peers' memory. "
        f"{PCIE_SM120_LABEL[0].upper() + PCIE_SM120_LABEL[1:]}."
    )
