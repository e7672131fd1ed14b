"""Tables for chapter 01: the version x gate matrix, one version's findings, the SM120 build check, and which
versions can run fused on a PCIe SM120 box."""

from __future__ import annotations

import pandas as pd

from verifylab.gates import Audit
from verifylab.gates.matrix import matrix_pivot
from verifylab.report.section import Prose
from verifylab.store.evidence import Evidence
from verifylab.vocab import FLASHINFER_JIT_ADMITS_SM12X, FLASHINFER_WORKSPACE_WITHOUT_MULTICAST

PCIE_SM120_LABEL = "inferred from source and an SM90 simulation, not run on SM120"


def matrix_overview(matrix: pd.DataFrame) -> pd.DataFrame:
    """Gate x version -> closed/open/info, versions sorted."""
    return matrix_pivot(matrix)


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


def pcie_sm120_outlook(matrix: pd.DataFrame, pins: pd.DataFrame) -> pd.DataFrame:
    """Per audited SGLang version, with the FlashInfer it pins: which gates a PCIe SM120 box must open for the
    all-reduce fusion to run, and whether it can run at all (FlashInfer's TRT-LLM workspace needs NVLink
    multicast before 0.6.15). Inferred from the audited source and the simulated-PCIe run on SM90."""
    from verifylab.vocab import version_at_least, version_key

    rows = []
    sglang = matrix[matrix["package"] == "sglang"]
    for version in sorted(sglang["version"].astype(str).unique(), key=version_key):
        found = sglang[sglang["version"].astype(str) == version]
        arch_gates = found[found["kind"].isin(["boolean_gate", "raise_guard"]) & (found["status"] == "closed")]
        preflight = (found["kind"] == "precondition").any()
        pin = pins.loc[pins["sglang"] == version, "flashinfer_pin"]
        pin = pin.iloc[0] if len(pin) and pin.iloc[0] else None
        to_open = [f"{len(arch_gates)} SGLang arch gate(s)"]
        if pin and not version_at_least(pin, FLASHINFER_JIT_ADMITS_SM12X):
            to_open.append("FlashInfer's JIT arch list")
        if preflight:
            to_open.append("the multicast-preflight precondition")
        if pin is None:
            verdict = "unknown: no FlashInfer pin recorded"
        elif version_at_least(pin, FLASHINFER_WORKSPACE_WITHOUT_MULTICAST):
            verdict = "fused after verifylab gates apply --arch sm120" + (
                "" if version_at_least(pin, FLASHINFER_JIT_ADMITS_SM12X) else " (SM12x experimental in this FlashInfer)"
            )
        else:
            verdict = (
                "not with the pinned FlashInfer: "
                + f"its workspace needs multicast before {FLASHINFER_WORKSPACE_WITHOUT_MULTICAST}"
            )
        rows.append(
            {
                "sglang": version,
                "flashinfer (pinned)": pin or "?",
                "workspace preflight": "yes" if preflight else "no",
                "to open": ", ".join(to_open),
                "PCIe SM120": verdict,
                "provenance": PCIE_SM120_LABEL,
            }
        )
    return pd.DataFrame(rows).set_index("sglang")


def pcie_sm120_finding(outlook: pd.DataFrame) -> Prose:
    """Which versions run fused on a PCIe SM120 box, in one sentence formatted from the outlook table."""
    fused = [v for v, verdict in outlook["PCIe SM120"].items() if verdict.startswith("fused")]
    if not fused:
        return Prose(
            f"No audited SGLang version runs fused on a PCIe SM120 box with its pinned FlashInfer ({PCIE_SM120_LABEL})."
        )
    pins = outlook.loc[fused, "flashinfer (pinned)"]
    return Prose(
        f"Of the audited SGLang versions, {', '.join(fused)} (FlashInfer {', '.join(pins)}) can run the all-reduce "
        f"fusion on a PCIe SM120 box once `verifylab gates apply --arch sm120` has opened the gates of the table; "
        "older ones pin a FlashInfer whose workspace needs NVLink multicast "
        f"(before {FLASHINFER_WORKSPACE_WITHOUT_MULTICAST}). "
        "All of them need peer-to-peer access between the GPUs: the TRT-LLM workspace is peer-to-peer buffers. "
        f"{PCIE_SM120_LABEL[0].upper() + PCIE_SM120_LABEL[1:]}."
    )
