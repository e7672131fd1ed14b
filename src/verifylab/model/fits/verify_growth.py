"""How a verify cycle (and a plain step) grows with one stream's context inside SGLang, per verify kernel, from the
stored engine runs (``benchmarks/engine_reads``): the growth each run's prediction file gave before it ran beside the
growth measured, and the growth refitted on the cells up to :data:`FIT_CONTEXT_MAX` with every longer cell held out
and predicted (a range from the slopes between the fitted contexts) beside what was measured."""

from __future__ import annotations

import pandas as pd

from verifylab.model.fits.engine_reads import context_cells
from verifylab.model.inputs.engine_cells import EngineCells
from verifylab.model.inputs.stored import StoredRuns
from verifylab.span import Span

FIT_CONTEXT_MAX = 16384  # fitted on cells up to this context; every longer one is held out
GROWTH_PREDICTION = "engine_growth_prediction"
SERIES = ["gpu", "shape", "backend", "mode", "streams"]
# The kernel that verifies a chain (EAGLE-3) or decodes a token (plain) per backend of the engine runs
KERNEL_OF = {
    ("triton", "eagle3"): "serial",
    ("triton-splitkv", "eagle3"): "split-kv",
    ("flashinfer", "eagle3"): "flashinfer",
    ("triton", "plain"): "decode",
    ("triton-splitkv", "plain"): "decode",
    ("flashinfer", "plain"): "decode",
}


def _timed(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with one time column: a verify cycle for EAGLE-3, a step for plain decoding (ms)."""
    cycle = cells["cycle_ms"] if "cycle_ms" in cells else pd.Series(float("nan"), index=cells.index)
    return cells.assign(ms=cycle.where(cells["mode"] == "eagle3", cells["step_ms"]))


def context_growth_fit(runs: StoredRuns) -> pd.DataFrame:
    """Every held-out cell (context above :data:`FIT_CONTEXT_MAX`) of a series (GPU, target, backend, mode, streams)
    with at least two fitted contexts: predicted from the series' longest fitted cell plus the context added times the
    slopes between consecutive fitted contexts (their lowest to highest), beside what was measured. ``miss`` is the
    range's midpoint over the measured time, less one; ``width`` its high over its low."""
    cells = context_cells(runs)
    if cells.empty:
        return pd.DataFrame()
    rows = []
    for key, series in _timed(cells).groupby(SERIES, sort=True):
        series = series.dropna(subset=["ms"]).sort_values("context")
        fitted, held = series[series["context"] <= FIT_CONTEXT_MAX], series[series["context"] > FIT_CONTEXT_MAX]
        if len(fitted) < 2 or held.empty:
            continue
        thousands = fitted["context"].to_numpy() / 1000
        times = fitted["ms"].to_numpy()
        slopes = [(times[i + 1] - times[i]) / (thousands[i + 1] - thousands[i]) for i in range(len(times) - 1)]
        base_at, base_ms = thousands[-1], float(times[-1])
        gpu, shape, backend, mode, streams = key
        for cell in held.itertuples():
            added = cell.context / 1000 - base_at
            low, high = sorted((base_ms + min(slopes) * added, base_ms + max(slopes) * added))
            rows.append(
                {
                    "gpu": gpu,
                    "shape": shape,
                    "backend": backend,
                    "mode": mode,
                    "kernel": KERNEL_OF.get((backend, mode), backend),
                    "streams": int(streams),
                    "context": int(cell.context),
                    "fitted_contexts": ", ".join(f"{int(c):,}" for c in fitted["context"]),
                    "measured_ms": float(cell.ms),
                    "predicted_low_ms": low,
                    "predicted_high_ms": high,
                    "miss": (low + high) / 2 / float(cell.ms) - 1,
                    "width": high / low if low > 0 else float("inf"),
                    "run": cell.run,
                }
            )
    return pd.DataFrame(rows)


def stored_growth_check(runs: StoredRuns) -> pd.DataFrame:
    """Each growth a run's prediction file gave before it ran (an EAGLE-3 cycle between two contexts per backend and
    target depth) beside the growth that run's GPU measured between the same contexts (the newest run of the GPU
    that stores the prediction wins)."""
    cells = context_cells(runs)
    if cells.empty:
        return pd.DataFrame()
    at = _timed(cells).set_index([*SERIES, "context"])["ms"]
    rows = {}
    for stored in runs.run_tables(GROWTH_PREDICTION):
        run_id, gpu = stored.run_id, stored.gpu
        for p in stored.frame.itertuples():
            series = (gpu, p.shape, p.backend, p.mode, int(p.streams))
            low, high = (*series, int(p.context_low)), (*series, int(p.context_high))
            if low not in at.index or high not in at.index:
                continue
            measured = float(at[high] - at[low])
            rows[series] = {
                "gpu": gpu,
                "shape": p.shape,
                "layers": int(p.layers),
                "backend": p.backend,
                "kernel": p.kernel,
                "streams": int(p.streams),
                "context_low": int(p.context_low),
                "context_high": int(p.context_high),
                "predicted_low_ms": float(p.growth_low_ms),
                "predicted_high_ms": float(p.growth_high_ms),
                "measured_ms": measured,
                "prediction_run": run_id,
            }
    return pd.DataFrame(list(rows.values()))


def splitkv_rate(engine: EngineCells) -> tuple[Span, str] | None:
    """What Triton's split-KV verify (its gate lifted: a patched SGLang) adds to an EAGLE-3 cycle per layer, per stream
    and per 1,000 tokens of each stream's context (ms), from the slopes of the deepest stored target's split-KV series
    between its contexts up to :data:`FIT_CONTEXT_MAX` at every stream count measured (their lowest to highest), and
    the cells it came from; None where no such series is stored."""
    cells = engine.cells
    if cells.empty:
        return None
    split = _timed(cells[(cells["backend"] == "triton-splitkv") & (cells["mode"] == "eagle3")])
    split = split[(split["context"] <= FIT_CONTEXT_MAX) & split["shape"].map(engine.layers).notna()]
    if split.empty:
        return None
    deepest = max(split["shape"].unique(), key=lambda s: engine.layers(s) or 0)
    layers = engine.layers(deepest) or 1
    rates = []
    for (gpu, streams), series in split[split["shape"] == deepest].groupby(["gpu", "streams"]):
        series = series.sort_values("context")
        if len(series) < 2:
            continue
        grown = float(series["ms"].iloc[-1] - series["ms"].iloc[0])
        added = (int(series["context"].iloc[-1]) - int(series["context"].iloc[0])) / 1000
        rates.append((grown / added / layers / int(streams), gpu))
    if not rates:
        return None
    runs_used = ", ".join(sorted(split[split["shape"] == deepest]["run"].unique()))
    gpus = ", ".join(sorted({g.upper() for _, g in rates}))
    source = (
        f"measured: the {layers}-layer MLA target's EAGLE-3 cycle on Triton's split-KV verify, its growth "
        f"per layer, stream and 1,000 tokens up to {FIT_CONTEXT_MAX:,} tokens ({runs_used}; {gpus}, SM90; SGLang "
        "0.5.17 with its gfx95 gate lifted)"
    )
    return Span(min(r for r, _ in rates), max(r for r, _ in rates)), source
