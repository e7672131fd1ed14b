"""A profiled run's tables per variant: summarize each variant's per-rank traces into the tables chapter 03
stores (``trace_steps``, ``trace_kernels``, ``allreduce_kernels``), or summarize a stored run's traces again."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from verifylab.errors import ParameterError
from verifylab.store.runs import RunStore
from verifylab.trace.analyze import TraceSummary, summarize_traces

PROFILE_TABLES = ("trace_steps", "trace_kernels", "allreduce_kernels", "profile_state")


def summarize_variant(traces: list[Path], variant: str, message_bytes: int | None) -> dict:
    """The profile tables of one variant's per-rank traces, each with a variant column (and the notes)."""
    summary = summarize_traces(traces, message_bytes=message_bytes)
    return {
        "trace_steps": summary.steps.assign(norm=variant).assign(variant=variant),
        "trace_kernels": summary.kernels.assign(variant=variant),
        "allreduce_kernels": allreduce_kernels_per_pass(summary).assign(variant=variant),
        "per_step": summary.per_step(),
        "notes": summary.notes,
    }


def resummarize_profiles(store: RunStore, run_id: str, message_bytes: int | None = None) -> list[str]:
    """Summarize a run's stored per-variant traces (``profile/<variant>/``) again, e.g. after the kernel
    classification learned a name, and rewrite its profile tables. Returns the variants found."""
    folder = store.path(run_id) / "profile"
    variants = sorted(d.name for d in folder.iterdir() if d.is_dir() and any(d.glob("*.trace.json*")))
    if not variants:
        raise ParameterError(f"run {run_id} holds no per-variant traces under {folder}")
    gathered: dict[str, list[pd.DataFrame]] = {t: [] for t in ("trace_steps", "trace_kernels", "allreduce_kernels")}
    for variant in variants:
        tables = summarize_variant(sorted((folder / variant).glob("*.trace.json*")), variant, message_bytes)
        for table in gathered:
            gathered[table].append(tables[table])
    for table, frames in gathered.items():
        store.write_table(run_id, table, pd.concat(frames, ignore_index=True), fmt="csv")
    return variants


ALLREDUCE_KERNEL_COLUMNS = ["phase", "impl", "kernel", "per_pass", "passes"]


def allreduce_kernels_per_pass(summary: TraceSummary) -> pd.DataFrame:
    """Per phase (target, draft, ...): all-reduce kernels per pass by implementation (NCCL, SGLang custom,
    FlashInfer fused) and emitted name, averaged over the phase's passes and the ranks."""
    colls = summary.collectives
    if colls.empty or "kind" not in colls or not (colls["kind"] == "allreduce").any():
        return pd.DataFrame(columns=ALLREDUCE_KERNEL_COLUMNS)
    steps = summary.steps[["rank", "step", "phase"]]
    passes = steps.groupby(["rank", "phase"]).size().rename("passes").reset_index()
    found = colls[colls["kind"] == "allreduce"].merge(steps, on=["rank", "step"])
    counts = found.groupby(["rank", "phase", "impl", "name"]).size().rename("count").reset_index()
    counts = counts.merge(passes, on=["rank", "phase"])
    counts["per_pass"] = counts["count"] / counts["passes"]
    out = counts.groupby(["phase", "impl", "name"], as_index=False).agg(
        per_pass=("per_pass", "mean"), passes=("passes", "max")
    )
    return out.rename(columns={"name": "kernel"})[ALLREDUCE_KERNEL_COLUMNS].sort_values(
        ["phase", "per_pass"], ascending=[True, False], ignore_index=True
    )
