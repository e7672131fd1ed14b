"""Chapter 4's verify kernels: each kernel's correctness verdict and time per layer beside the price the model gave it
before the run (``benchmarks/verify_kernels``), and the serial kernel's model refitted on those cells with what it
fitted and what it held out (:mod:`verifylab.model.fits.verify_kernels`). Every number in the words is a cell."""

from __future__ import annotations

import math

import pandas as pd

from verifylab.model.views import (
    FIT_CONTEXT_MAX,
    context_growth_fit,
    gpu_title,
    kernel_cells,
    serial_kernel_fit,
    stored_growth_check,
    stored_runs,
)
from verifylab.report.tables import Table, header
from verifylab.sources import MeasuredRuns

SHAPE_WORDS = {
    "mla16": "MLA, 16 heads (DeepSeek-V2-Lite, TP 1)",
    "mla8-kimi": "MLA, 8 heads (Kimi-K2.5 at TP 8)",
    "dense": "dense GQA 32/8 (Llama-3-8B)",
}
KERNEL_WORDS = {
    "serial": "Triton serial extend",
    "split-kv": "Triton split-KV",
    "flashinfer-fa2": "FlashInfer MLA fa2 (SM120's)",
    "flashinfer-fa3": "FlashInfer MLA fa3 (SM90's)",
    "flashinfer": "FlashInfer paged prefill",
}
SHOWN_CONTEXTS = (2048, 65536)
PROVENANCE = "measured (run); modelled (the price committed before the run)"


def kernel_view(runs: MeasuredRuns) -> pd.DataFrame:
    """One row per shape, kernel and context shown (one stream): the verdict, the worst error, the time per layer and
    the model's price."""
    return _view(kernel_cells(stored_runs(runs)))


def _view(cells: pd.DataFrame) -> pd.DataFrame:
    if cells.empty:
        return pd.DataFrame()
    one = cells[(cells["streams"] == 1) & cells["context"].isin(SHOWN_CONTEXTS)]
    rows = []
    for r in one.sort_values(["shape", "context"]).itertuples():
        low, high = float(getattr(r, "predicted_low_ms", "nan")), float(getattr(r, "predicted_high_ms", "nan"))
        priced = math.isfinite(low) and math.isfinite(high)  # the run stored its prediction
        rows.append(
            {
                "layer": SHAPE_WORDS.get(r.shape, r.shape),
                "kernel": KERNEL_WORDS.get(r.kernel, r.kernel),
                "context": f"{r.context // 1024}k",
                "verdict": r.verdict,
                "worst_error": r.worst_rel_error,
                "measured_us": r.ms * 1e3,
                "priced_us": f"{low * 1e3:,.1f} to {high * 1e3:,.1f}" if priced else None,
                "measured_over_priced": r.ms / (low * high) ** 0.5 if priced else None,
                "GPU": gpu_title(r.gpu),
                "run": r.run,
                "provenance": PROVENANCE,
            }
        )
    return pd.DataFrame(rows)


def _cell(view: pd.DataFrame, layer: str, kernel: str, context: int, column: str) -> str:
    """A cell's text as the table shows it."""
    shown = Table(view).cells()
    row = view.index[
        (view["layer"] == SHAPE_WORDS[layer])
        & (view["kernel"] == KERNEL_WORDS[kernel])
        & (view["context"] == f"{context // 1024}k")
    ]
    return str(shown[header(column)].iloc[row[0]]) if len(row) else "—"


def kernel_words(runs: MeasuredRuns) -> str:
    """The finding: every kernel's verdict, then the layer SM120 runs (Kimi's, 8 heads) at 64k per kernel."""
    cells = kernel_cells(stored_runs(runs))
    if cells.empty:
        return "No verify-kernel run is stored: the verify pass's kernels are priced, not measured."
    view = _view(cells)
    passed, total = int((cells["verdict"] == "pass").sum()), len(cells)
    gpu = gpu_title(str(cells["gpu"].iloc[0]))
    worst = Table(pd.DataFrame({"worst_error": [cells["worst_rel_error"].max()]})).cells().iloc[0, 0]
    k = 65536
    return (
        f"Every verify kernel computed the chain's attention right on one {gpu}: {passed} of {total} cells within "
        f"{worst} of an fp32 reference at every draft position (tolerance "
        f"{cells['tolerance'].max():g}), Triton's split-KV kernel on the MLA shapes included (SGLang 0.5.17; from "
        f"0.5.22 its can_handle refuses them, chapter 1). At {k // 1024}k tokens of one stream's context Kimi-K2.5's "
        f"layer (8 heads per GPU at TP 8) took {_cell(view, 'mla8-kimi', 'serial', k, 'measured_us')} µs on the "
        f"serial kernel SGLang runs on SM120 by default, {_cell(view, 'mla8-kimi', 'split-kv', k, 'measured_us')} µs "
        f"on split-KV and {_cell(view, 'mla8-kimi', 'flashinfer-fa2', k, 'measured_us')} µs on FlashInfer's fa2 MLA "
        f"kernel (the one SM120 would run). The model priced the serial kernel at "
        f"{_cell(view, 'mla8-kimi', 'serial', k, 'priced_us')} µs "
        f"(it took {_cell(view, 'mla8-kimi', 'serial', k, 'measured_over_priced')} times that) and the "
        f"once-per-pass kernels at {_cell(view, 'mla8-kimi', 'flashinfer-fa2', k, 'priced_us')} µs: they took "
        f"{_cell(view, 'mla8-kimi', 'flashinfer-fa2', k, 'measured_over_priced')} (fa2) and "
        f"{_cell(view, 'mla8-kimi', 'split-kv', k, 'measured_over_priced')} (split-KV) times that, a fixed cost and a "
        "split the price had no term for. Measured on SM90, never on SM120 (about 100 KB of shared memory per block "
        "against 228 KB changes Triton's launch configurations)."
    )


def refit_view(runs: MeasuredRuns) -> pd.DataFrame:
    """The serial kernel's held-out cells at the longest context: measured beside the refitted model."""
    fitted = serial_kernel_fit(stored_runs(runs))
    if fitted is None:
        return pd.DataFrame()
    _, frame = fitted
    longest = frame[~frame["fitted"] & (frame["context"] == frame["context"].max())]
    return pd.DataFrame(
        {
            "layer": longest["shape"].map(lambda s: SHAPE_WORDS.get(s, s)),
            "streams": longest["streams"],
            "context": longest["context"].map(lambda c: f"{c // 1024}k"),
            "measured_us": longest["measured_ms"] * 1e3,
            "refitted_us": longest["predicted_ms"] * 1e3,
            "miss_pct": longest["miss"] * 100,
            "run": longest["run"],
            "provenance": "measured (run); modelled (refitted, this cell held out)",
        }
    ).reset_index(drop=True)


def refit_words(runs: MeasuredRuns) -> str:
    """Which cells the refit saw and how far off it is on the rest (median and worst of the held-out cells)."""
    fitted = serial_kernel_fit(stored_runs(runs))
    if fitted is None:
        return "No verify-kernel run is stored: the serial kernel keeps the rate fitted on the engine runs."
    rate, frame = fitted
    held = frame[~frame["fitted"]]
    worst = held.loc[held["miss"].abs().idxmax()]
    misses = [held["miss"].abs().median() * 100, worst["miss"] * 100]
    table = Table(pd.DataFrame({"miss_pct": misses})).cells()
    per = rate.ms_per_1k_per_element.low * 1e6
    return (
        f"The serial kernel's model, {rate.source}: one program's loop costs {rate.ms_per_1k_fixed * 1e3:.1f} µs "
        f"per 1,000 tokens plus {per:.1f} ns per key+value element, {rate.programs_per_sm:.2f} programs per SM at "
        f"once. Held out: {len(held)} of {len(frame)} cells (the longer contexts, 4 streams, the Kimi layer); their "
        f"median miss is {table.iloc[0, 0]} % either way, the worst {table.iloc[1, 0]} % "
        f"({SHAPE_WORDS.get(worst['shape'], worst['shape'])} at {int(worst['streams'])} streams, where the waves are "
        "the crudest part of the model)."
    )


BACKEND_WORDS = {"triton": "Triton", "triton-splitkv": "Triton, split-KV gate lifted", "flashinfer": "FlashInfer"}
ENGINE_KERNEL_WORDS = {
    "serial": "Triton serial extend",
    "split-kv": "Triton split-KV",
    "flashinfer": "FlashInfer MLA (fa3 on SM90)",
}
TARGET_WORDS = {"mla": "12-layer MLA", "mla36": "36-layer MLA", "dense": "4-layer dense (GQA 32/8)"}


def growth_check_view(runs: MeasuredRuns) -> pd.DataFrame:
    """Per target depth and verify kernel: an EAGLE-3 cycle's growth between two contexts (one stream) measured inside
    SGLang beside the growth the prediction file gave before the run."""
    check = stored_growth_check(stored_runs(runs))
    if check.empty:
        return pd.DataFrame()
    check = check.sort_values(["shape", "kernel"])
    return pd.DataFrame(
        {
            "target": check["shape"].map(lambda s: TARGET_WORDS.get(s, s)),
            "kernel": check["kernel"].map(lambda k: ENGINE_KERNEL_WORDS.get(k, k)),
            "contexts": [
                f"{lo // 1024}k to {hi // 1024}k"
                for lo, hi in zip(check["context_low"], check["context_high"], strict=True)
            ],
            "measured_ms": check["measured_ms"],
            "predicted_ms": [
                f"{lo:,.2f} to {hi:,.2f}"
                for lo, hi in zip(check["predicted_low_ms"], check["predicted_high_ms"], strict=True)
            ],
            "GPU": check["gpu"].map(gpu_title),
            "run": check["prediction_run"],
            "provenance": PROVENANCE,
        }
    ).reset_index(drop=True)


def growth_fit_view(runs: MeasuredRuns) -> pd.DataFrame:
    """Every held-out engine cell (above the fitted contexts): measured beside the range refitted on the shorter
    contexts of its own series."""
    fit = context_growth_fit(stored_runs(runs))
    if fit.empty:
        return pd.DataFrame()
    return pd.DataFrame(
        {
            "GPU": fit["gpu"].map(gpu_title),
            "target": fit["shape"].map(lambda s: TARGET_WORDS.get(s, s)),
            "backend": fit["backend"].map(lambda b: BACKEND_WORDS.get(b, b)),
            "mode": fit["mode"].map({"eagle3": "EAGLE-3 cycle", "plain": "plain step"}),
            "streams": fit["streams"],
            "context": fit["context"].map(lambda c: f"{c // 1024}k"),
            "fitted_on": fit["fitted_contexts"],
            "measured_ms": fit["measured_ms"],
            "predicted_ms": [
                f"{lo:,.2f} to {hi:,.2f}"
                for lo, hi in zip(fit["predicted_low_ms"], fit["predicted_high_ms"], strict=True)
            ],
            "miss_pct": fit["miss"] * 100,
            "run": fit["run"],
            "provenance": "measured (run); modelled (refitted on the shorter contexts, this cell held out)",
        }
    )


def growth_words(runs: MeasuredRuns) -> str:
    """The finding: the growth predicted before the runs per kernel against measured, then the refit's held-out
    misses (median overall and per verify kernel, the widest range, the worst series)."""
    record = stored_runs(runs)
    check, fit = stored_growth_check(record), context_growth_fit(record)
    if check.empty or fit.empty:
        return (
            "No engine run with contexts on both sides of the fit is stored: the verify pass's growth is priced only."
        )
    deep = check[check["layers"] == check["layers"].max()].set_index("kernel")

    def said(kernel: str) -> str:
        row = deep.loc[kernel]
        ratio = row["measured_ms"] / (row["predicted_low_ms"] * row["predicted_high_ms"]) ** 0.5
        return (
            f"{row['measured_ms']:,.1f} ms on {ENGINE_KERNEL_WORDS.get(kernel, kernel)} (predicted "
            f"{row['predicted_low_ms']:,.2f} to {row['predicted_high_ms']:,.2f}: {ratio:,.2f} times that)"
        )

    per_kernel = fit[fit["mode"] == "eagle3"].groupby("kernel")["miss"].apply(lambda m: m.abs().median() * 100)
    kernels = ", ".join(f"{ENGINE_KERNEL_WORDS.get(k, k)} {v:.1f} %" for k, v in per_kernel.items())
    worst = fit.loc[fit["miss"].abs().idxmax()]
    shown = [k for k in ("serial", "split-kv", "flashinfer") if k in deep.index]
    return (
        f"Inside SGLang, from {int(deep['context_low'].iloc[0]) // 1024}k to "
        f"{int(deep['context_high'].iloc[0]) // 1024}k tokens of one stream's context, the "
        f"{int(deep['layers'].iloc[0])}-layer MLA target's EAGLE-3 cycle grew {'; '.join(said(k) for k in shown)}. "
        "The price of the once-per-pass kernels has no term for the split-KV kernel's split and merge or for a cycle "
        f"bound by the host. Refitted on each series' own contexts up to {FIT_CONTEXT_MAX // 1024}k and held out above "
        f"it, the {len(fit)} longer cells of every stored engine run are predicted within a median of "
        f"{fit['miss'].abs().median() * 100:.1f} % (the range's midpoint against the measured time; per verify kernel: "
        f"{kernels}), every range at most {fit['width'].max():.2f} times wide. The worst miss, "
        f"{worst['miss'] * 100:+.0f} %, is the {TARGET_WORDS.get(worst['shape'], worst['shape'])} target's "
        f"{'EAGLE-3 cycle' if worst['mode'] == 'eagle3' else 'plain step'} on "
        f"{BACKEND_WORDS.get(worst['backend'], worst['backend'])} at {int(worst['streams'])} "
        f"stream{'s' if worst['streams'] > 1 else ''} and {int(worst['context']) // 1024}k on one "
        f"{gpu_title(worst['gpu'])}."
    )
