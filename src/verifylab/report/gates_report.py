"""Tables for chapter 01: the version x gate matrix, one version's findings, the SM120 build check."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from verifylab.gates import Audit
from verifylab.gates.matrix import matrix_pivot
from verifylab.report.section import Section
from verifylab.runs import RunStore

MATRIX_FILE = Path("gates") / "gate_matrix.csv"


def load_matrix(data_dir: Path | str) -> pd.DataFrame:
    """The stored matrix (``verifylab gates matrix``), provenance: audited published wheels."""
    return pd.read_csv(Path(data_dir) / MATRIX_FILE, keep_default_na=False)


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


def sm120_build_runs(data_dir: Path | str) -> pd.DataFrame:
    """The SM120 build checks stored as measured runs, labelled with their machine."""
    store = RunStore(Path(data_dir) / "runs")
    frames = []
    for run_id in store.runs_with_table("sm120_build"):
        frame = store.read_table(run_id, "sm120_build")
        frame.insert(0, "run", run_id)
        frame["machine"] = store.manifest(run_id).label
        frames.append(frame)
    return pd.concat(frames, ignore_index=True).fillna("") if frames else pd.DataFrame()


def live_gates_section(mode: str, root: Path | None, arch: str, apply_patch: bool) -> Section:
    """Chapter 01's live part: preflight of the box, audit of its install, optional apply + verify."""
    from verifylab.gates import apply, audit, default_root, parse_arch, verify
    from verifylab.gates.preflight import box_preflight

    section = Section("This box (live mode)")
    if mode != "live":
        return section.add("Replay mode: the box's own audit and preflight run in live mode.", "")
    root = root or default_root()
    section.add("Preflight", box_preflight(arch=parse_arch(arch)))
    section.add(f"Audit of {root}", audit_table(audit(root, arch)))
    if apply_patch:
        result = apply(root, arch)
        section.add("Applied", "\n".join(result.notes) or "nothing to change")
        section.add("Verification", pd.DataFrame(verify(root, arch).checks))
    return section
