"""Tables for chapter 03: the verify-pass breakdown, reported next to measured, each row with provenance."""

from __future__ import annotations

import pandas as pd

from verifylab.derived import derived
from verifylab.reported import reported_value
from verifylab.store.evidence import Evidence
from verifylab.store.runs import RunStore

COMPUTE_PARTS = {"gemm_moe_us": "GEMM / MoE", "attention_us": "attention", "norm_us": "norm"}


def reported_breakdown(figures: pd.DataFrame) -> pd.DataFrame:
    """The case study's verify pass: ~25 ms of all-reduces, ~5 ms of compute (reported)."""
    source = "case study, 8x RTX PRO 6000, TP 8"
    return pd.DataFrame(
        [
            {
                "source": source,
                "part": "all-reduce (NCCL)",
                "ms": reported_value(figures, "verify_allreduce_ms"),
                "provenance": "reported",
            },
            {
                "source": source,
                "part": "compute",
                "ms": reported_value(figures, "verify_compute_ms"),
                "provenance": "reported",
            },
        ]
    )


def measured_breakdown(store: RunStore, gpu_only: bool = True) -> pd.DataFrame:
    """Mean per-step parts of every stored run with a ``trace_steps`` table of synthetic verify passes
    (measured). CPU runs are mechanics only (their times are not comparable) and are left out unless
    ``gpu_only`` is False; live server profiles (CUDA-graph phases) have their own sections."""
    rows = []
    for run_id in store.runs_with_table("trace_steps"):
        manifest = store.manifest(run_id)
        if gpu_only and manifest.gpu_count == 0:
            continue
        steps = store.read_table(run_id, "trace_steps")
        steps = steps[steps["phase"] == "verify_step"]
        if steps.empty:
            continue
        group_col = "norm" if "norm" in steps.columns else "backend"
        for variant, part in steps.groupby(group_col):
            mean = part.mean(numeric_only=True)
            source = f"{variant}\n(run {run_id})"  # the run id whole (a chart's label breaks at the newline)
            if mean.get("allreduce_count", 0) > 0:
                rows.append({"source": source, "part": "all-reduce", "ms": mean["comm_us"] / 1e3})
            named = sum(mean.get(col, 0.0) for col in COMPUTE_PARTS)
            if mean.get("kernel_count", 0) > 0:
                for col, name in COMPUTE_PARTS.items():
                    rows.append({"source": source, "part": name, "ms": mean.get(col, 0.0) / 1e3})
                rows.append(
                    {"source": source, "part": "other kernels", "ms": max(mean["compute_us"] - named, 0.0) / 1e3}
                )
                rows.append({"source": source, "part": "idle (gaps)", "ms": mean["idle_us"] / 1e3})
            else:
                rows.append({"source": source, "part": "compute", "ms": mean["compute_us"] / 1e3})
    frame = pd.DataFrame(rows, columns=["source", "part", "ms"])
    frame["provenance"] = "measured"
    return frame[frame["ms"] > 0]


def allreduce_counts(store: RunStore) -> pd.DataFrame:
    """All-reduces per step and rank found in each stored trace summary."""
    rows = []
    for run_id in store.runs_with_table("trace_steps"):
        steps = store.read_table(run_id, "trace_steps")
        label = store.manifest(run_id).label
        for rank, part in steps.groupby("rank"):
            rows.append(
                {
                    "run_id": run_id,
                    "label": label,
                    "rank": rank,
                    "steps": len(part),
                    "allreduces_per_step": ", ".join(str(int(c)) for c in sorted(set(part["allreduce_count"]))),
                    "implementations": ", ".join(sorted(set(part["allreduce_impls"].dropna().astype(str)) - {""}))
                    or "none",
                    "provenance": "measured",
                }
            )
    return pd.DataFrame(rows)


@derived
def chapter3_tables(ev: Evidence) -> dict[str, pd.DataFrame]:
    """Everything chapter 03 shows in replay mode."""
    store = ev.runs
    figures = ev.figures
    reported = figures[
        figures.figure_id.isin(
            [
                "allreduces_per_verify",
                "verify_allreduce_ms",
                "verify_total_ms",
                "verify_compute_ms",
                "verify_cycle_share_pct",
            ]
        )
    ]
    return {
        "reported": reported[["figure_id", "quantity", "value", "unit", "seed_file", "quote", "provenance"]],
        "breakdown": pd.concat([reported_breakdown(figures), measured_breakdown(store)], ignore_index=True),
        "counts": allreduce_counts(store),
    }
