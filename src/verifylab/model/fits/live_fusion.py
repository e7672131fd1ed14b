"""Fusion's saving on the live SGLang TP-2 passes (2 x H200, NVLink, a random-weight model: kernel times, not
model quality) beside what the pass model (:func:`~verifylab.model.comm_pass.predict_pass`, as `model pass` runs
it) predicts for them: with NCCL as the unfused path (how `model pass` prices a box by default), and with the
all-reduce SGLang really ran there (its custom all-reduce, per call as the baseline's own trace measured it:
`model pass --unfused-us`). The fused kernel is the campaign's isolated curve times the in-pass factor fitted on
every trace (:mod:`verifylab.model.in_pass`), the run's own included; the factor a fit without the run predicts is
shown beside it, out of sample."""

from __future__ import annotations

import pandas as pd

from verifylab.errors import ModelInputError
from verifylab.model.fits.in_pass import InPassFit, fused_in_pass_fit
from verifylab.model.inputs.stored import StoredRuns
from verifylab.model.inputs.traces import LIVE_PATH, SYNTHETIC, LivePair
from verifylab.model.pricing.measured_pass import fused_saving_us
from verifylab.vocab import COMM_CAMPAIGN_TABLES


def live_fusion_check(runs: StoredRuns) -> pd.DataFrame:
    """Per stored live TP-2 run with a baseline and a fusion variant: the measured saving per target pass beside
    the pass model's (the fitted in-pass factor, its range, and the fit without the run), and the factor the run's
    fused kernels imply."""
    campaign = runs.newest_with(*COMM_CAMPAIGN_TABLES)
    if campaign is None:
        return pd.DataFrame()
    curves = [c for c in runs.curves(campaign) if c.path == LIVE_PATH and c.impl in ("nccl", "fused")]
    if len(curves) != 2:
        raise ModelInputError(f"run {campaign} has no {LIVE_PATH} NCCL and fused curves to price the live passes with")
    fused_curve = next(c for c in curves if c.impl == "fused")
    nccl_factor = runs.in_pass_factors().get((LIVE_PATH, "nccl"), 1.0)
    fit = fused_in_pass_fit(runs)
    rows = []
    for pair in runs.live_pairs():
        base, n_fused, size = pair.baseline, pair.fusion.fused, pair.baseline.message_bytes
        left_out = fused_in_pass_fit(runs, leave_out=pair.run).at(size)

        def saving(factor: float, unfused: float | None, pair: LivePair = pair) -> float:
            factors = {"nccl": nccl_factor, "fused": factor}
            busy = pair.baseline
            return fused_saving_us(
                curves, LIVE_PATH, busy.message_bytes, busy.norm_call_us, pair.fusion.fused, factors, unfused
            )

        low, high = fit.range_at(size)
        measured = pair.measured_saving_us()
        predicted = saving(fit.at(size), base.call_us)
        rows.append(
            {
                "run": pair.run,
                "bytes_per_allreduce": int(size),
                "fused_of_allreduces": f"{n_fused} of {base.allreduces}",
                "measured_saving_us": measured,
                "predicted_as_run_us": predicted,
                "predicted_as_run_low_us": saving(high, base.call_us),
                "predicted_as_run_high_us": saving(low, base.call_us),
                "error_pct": 100 * (predicted - measured) / measured,
                "predicted_left_out_us": saving(left_out, base.call_us),
                "predicted_nccl_unfused_us": saving(fit.at(size), None),
                "unfused_call_us": f"{base.call_us:.2f} (SGLang's custom all-reduce) vs NCCL "
                f"{next(c for c in curves if c.impl == 'nccl').at(size):.2f} isolated",
                "fused_in_pass_over_isolated": pair.fused_in_pass_us() / fused_curve.at(size),
                "fitted_factor": fit.at(size),
                "left_out_factor": left_out,
                "inputs": f"campaign {campaign} (isolated curves); in-pass factor {fit.source()}",
                "provenance": "modelled (fitted on these runs among others) vs measured "
                "(2 x H200, random-weight model: kernel times only)",
            }
        )
    return pd.DataFrame(rows)


def live_fusion_finding(check: pd.DataFrame, fit: InPassFit) -> str:
    """What the live check shows, from its rows: the measured saving beside the model's, in and out of sample, and
    what the unfused collective and the fitted in-pass factor carry."""
    if check.empty:
        return "No stored live TP-2 run holds both a baseline and a fusion variant: nothing to check the pass model on."
    measured, error = check["measured_saving_us"], check["error_pct"].abs()
    left_out = 100 * (check["predicted_left_out_us"] - measured) / measured
    implied, fitted = check["fused_in_pass_over_isolated"], check["fitted_factor"]
    synthetic = [p for p in fit.points if p.kind == SYNTHETIC]
    synthetic_words = (
        f"the synthetic passes' at {min(p.factor for p in synthetic):.2f}-{max(p.factor for p in synthetic):.2f} "
        f"at {', '.join(sorted({f'{p.message_bytes:,.0f}' for p in synthetic}))} B"
        if synthetic
        else "no synthetic pass traced it"
    )
    return (
        f"**On live SGLang TP-2 passes fusion saved {measured.min():.1f}-{measured.max():.1f} µs per pass; the pass "
        f"model, with the all-reduce SGLang ran there as the unfused path, predicts each within {error.max():.0f} %**"
        f" (a fit without the run: {left_out.min():+.0f} to {left_out.max():+.0f} %). Two inputs carry it. The "
        "unfused path: at two ranks SGLang runs its custom all-reduce, not NCCL; with NCCL's curve there the same "
        f"model says {check['predicted_nccl_unfused_us'].min():.0f}-{check['predicted_nccl_unfused_us'].max():.0f} "
        "µs, so a box is priced with the collective it runs. The fused kernel's cost inside a pass: the live "
        f"kernels ran at {implied.min():.2f}-{implied.max():.2f} of their isolated latency at "
        f"{int(check['bytes_per_allreduce'].iloc[0]):,} B, {synthetic_words}; the factor is fitted on both as a line "
        f"in the log of the message ({fitted.iloc[0]:.2f} here, ±{fit.spread:.0%}). The saving is a small "
        "difference of larger numbers: the model's range is wide, and a box's own trace settles it."
    )
