"""The live-smoke sections of chapters 02 and 03: what the pipeline measured against a real SGLang server
with a random-weight tiny model (benchmarks/live_smoke). Mechanics, not performance: each section says so."""

from __future__ import annotations

import pandas as pd

from verifylab.report.intervals import single_stream_intervals
from verifylab.report.section import Section
from verifylab.store.evidence import Evidence
from verifylab.store.runs import RunStore

LIVE_SMOKE = "live-smoke"  # the campaign benchmarks/live_smoke's parameters name
CAVEAT = (
    "Mechanics only, not performance: a random-weight tiny model at TP 1, so no all-reduce exists and fusion "
    "is not exercised; NGRAM acceptance on greedy noise says nothing about a real model's speed-up. What it "
    "shows is that the live path works against a real SGLang server: launch flags checked against its --help, "
    "accept length read from its meta_info, a profile captured through /start_profile and summarized."
)


def mechanics_runs(ev: Evidence) -> list[str]:
    """Ids of the stored runs that measured the mechanism only (live smokes, the live TP-2 run, ...)."""
    store = ev.runs
    smoke = set(live_smoke_runs(ev))
    return [m.run_id for m in store.manifests() if m.mechanics_only or m.run_id in smoke]


def live_smoke_runs(ev: Evidence) -> list[str]:
    """Ids of the stored live-smoke runs, oldest first."""
    store = ev.runs
    return store.of_campaign(LIVE_SMOKE)


def _latest_with(store: RunStore, table: str) -> str | None:
    """The newest live-smoke run that holds ``table``."""
    runs = [r for r in store.of_campaign(LIVE_SMOKE) if table in store.manifest(r).tables]
    return runs[-1] if runs else None


def _facts(store: RunStore, run_id: str) -> pd.DataFrame:
    m = store.manifest(run_id)
    model = (m.parameters.get("base") or {}).get("model_path", "—")
    return pd.DataFrame(
        [
            {
                "run_id": run_id,
                "label": m.label,
                "gpu": f"{m.gpu_name} (SM {m.compute_capability})",
                "sglang": m.versions.sglang,
                "flashinfer": m.versions.flashinfer,
                "torch": m.versions.torch,
                "model": model,
            }
        ]
    )


def live_smoke_benchmarks(ev: Evidence) -> Section:
    """Chapter 02: the smoke's variants as the real server ran them, one stream and the small sweep."""
    section = Section("Live smoke: a real SGLang server (mechanics only)")
    store = ev.runs
    run_id = _latest_with(store, "variant_state")
    if run_id is None:
        return section.add("No live-smoke run in this edition's data (benchmarks/live_smoke makes one).", "")
    section.add(CAVEAT, _facts(store, run_id))
    section.add(
        "Variants: requested vs in effect (read from the running server)", store.read_table(run_id, "variant_state")
    )
    single = store.table_or_none(run_id, "single_stream")
    if single is not None:
        section.add(
            "One stream: accept_length from the responses' meta_info (client, token-weighted) next to the "
            "server's own figure",
            single_stream_intervals(single),
        )
    cells = store.table_or_none(run_id, "sweep_cells")
    if cells is not None:
        keep = ["variant", "concurrency", "requests", "failed", "output_tokens_per_s", "accept_length"]
        section.add("The small sweep", cells[[c for c in keep if c in cells.columns]])
    return section


def live_smoke_profile(ev: Evidence, top: int = 12) -> Section:
    """Chapter 03: the smoke's profile of the real server, per phase, and its kernels as emitted."""
    section = Section("Live smoke: a profile of the real server (mechanics only)")
    store = ev.runs
    run_id = _latest_with(store, "trace_steps")
    if run_id is None:
        return section.add("No live-smoke profile in this edition's data.", "")
    steps = store.read_table(run_id, "trace_steps")
    per_phase = (
        steps.groupby("phase", as_index=False)
        .agg(
            launches=("step", "count"),
            kernels=("kernel_count", "mean"),
            span_us=("span_us", "mean"),
            attention_us=("attention_us", "mean"),
            gemm_us=("gemm_moe_us", "mean"),
            norm_us=("norm_us", "mean"),
            allreduces=("allreduce_count", "sum"),
        )
        .round(2)
    )
    section.add(
        f"{CAVEAT} Run {run_id}: CUDA-graph launches of one profile, by phase (TP 1: target passes are the "
        "largest graphs; no all-reduce to count)",
        per_phase,
    )
    kernels = store.table_or_none(run_id, "trace_kernels")
    if kernels is not None:
        section.add(f"The {top} kernels with the most device time, named as emitted", kernels.head(top))
    return section
