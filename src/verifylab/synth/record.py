"""Store a synthetic verify pass and its trace summary as a measured run."""

from __future__ import annotations

from pathlib import Path

from verifylab.host import capture_host
from verifylab.store.manifest import manifest_from_host
from verifylab.store.runs import RunStore
from verifylab.synth.runner import SynthConfig, run_synth_verify
from verifylab.trace import summarize_traces


def record_synth_run(cfg: SynthConfig, store: RunStore, run_id: str, label: str) -> str:
    """Run ``cfg``, summarize its traces and store ``trace_steps`` (+ per-step timings) under ``run_id``."""
    import pandas as pd

    result = run_synth_verify(cfg)
    summary = summarize_traces(result["traces"])
    host = capture_host(Path.cwd(), with_torch=True)
    manifest = manifest_from_host(
        run_id,
        label,
        host,
        {"synth": cfg.model_dump(mode="json")},
        purpose="synthetic TP verify pass, profiled and summarized",
    )
    manifest.notes.extend(summary.notes)
    store.create(manifest)
    steps = summary.steps.copy()
    steps.insert(0, "backend", cfg.backend)
    store.write_table(run_id, "trace_steps", steps, fmt="csv")
    timings = pd.DataFrame(
        [{"rank": int(r), "step": i, "wall_ms": t} for r, ts in result["step_ms"].items() for i, t in enumerate(ts)]
    )
    store.write_table(run_id, "step_wall_time", timings, fmt="csv")
    return run_id
