"""How well the speculation model held per grid run: the prediction a grid stored before it ran (``grid_prediction``)
beside its measurement and the model fitted afterwards, and each run's error on the sweeps it was fitted on and out
of sample. Reads the predicted-beside-measured view of :mod:`verifylab.analysis.speculation_load`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from verifylab.analysis.speculation_load import interval_miss
from verifylab.model.views import (
    calibrate_decode,
    fit_for,
    gain_flag,
    gains,
    grid_routing,
    grid_runs,
    stored_runs,
    sweeps,
)
from verifylab.sources import MeasuredRuns


def prediction_before_run(runs: MeasuredRuns, view: pd.DataFrame) -> pd.DataFrame:
    """Per grid run that stored the model's prediction made before it ran (``grid_prediction``): each cell's
    measured gain beside that prediction and beside the model fitted afterwards (``view``), with the first's
    miss; and plain decoding's step beside its spread floor (every token drawing its own experts)."""
    rows = []
    for run_id in grid_runs(runs):
        before = runs.table_or_none(run_id, "grid_prediction")
        if before is None or before.empty:
            continue
        after = view[view["run_id"] == run_id]
        keys = ["draft_tokens", "accept_target", "streams"]
        merged = before.merge(after, on=keys, how="inner", suffixes=("_before", ""))
        for r in merged.itertuples():
            rows.append(
                {
                    "accept_length": r.accept_target,
                    "draft_tokens": r.draft_tokens,
                    "streams": r.streams,
                    "gain": r.gain,
                    "gain_low": r.gain_low,
                    "gain_high": r.gain_high,
                    "before_low": r.gain_low_before,
                    "before_high": r.gain_high_before,
                    "before_miss": interval_miss(r.gain_low, r.gain_high, r.gain_low_before, r.gain_high_before),
                    "after_low": r.predicted_low,
                    "after_high": r.predicted_high,
                    "after_role": r.role,
                    "plain_ms": r.streams * 1e3 / r.plain_tokens_per_s,  # the view's plain mean, as a step
                    "plain_before_miss": interval_miss(
                        r.plain_tokens_per_s, r.plain_tokens_per_s, r.plain_tokens_per_s_low, r.plain_tokens_per_s_high
                    ),
                    "spread_floor_ms": r.spread_floor_ms,
                    "run": run_id,
                    "provenance": "measured, modelled",
                }
            )
    return pd.DataFrame(rows)


def grid_fit_summary(view: pd.DataFrame) -> pd.DataFrame:
    """Per grid run: how it was priced (the fit's run, how its plain and speculative servers routed), and the
    model's error on the sweeps it was fitted on and on the others: the median |mid of the range / measured - 1|
    and the share of cells whose measured interval meets the range within ``speculation_load.AGREEMENT``."""
    if view.empty:
        return pd.DataFrame()
    frame = view.assign(mid_error=((view["predicted_low"] + view["predicted_high"]) / 2 / view["gain"] - 1).abs())
    rows = []
    for (run_id, role), part in frame.groupby(["run_id", "role"]):
        rows.append(
            {
                "run": run_id,
                "role": "fitted on" if role == "fit" else "out of sample",
                "fitted_run": part["fitted_run"].iloc[0],
                "plain_routing": part["plain_routing"].iloc[0],
                "routing": part["routing"].iloc[0],
                "cells": len(part),
                "median_error": float(part["mid_error"].median()),
                "agreeing_share": float(part["agrees"].mean()),
                "provenance": "measured, modelled",
            }
        )
    return pd.DataFrame(rows)


def before_run_view(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`prediction_before_run` as the page shows it: each range as one cell, each miss as a percentage."""
    if table.empty:
        return table

    def span(low: pd.Series, high: pd.Series) -> list[str]:
        return [f"{lo:.2f}-{hi:.2f}" for lo, hi in zip(low, high, strict=True)]

    return pd.DataFrame(
        {
            "accept_length": table["accept_length"],
            "streams": table["streams"],
            "gain": table["gain"].round(2),
            "gain_interval": span(table["gain_low"], table["gain_high"]),
            "predicted_before": span(table["before_low"], table["before_high"]),
            "before_miss_pct": (100 * table["before_miss"]).round(0).astype("Int64"),
            "refit": span(table["after_low"], table["after_high"]),
            "refit_role": table["after_role"].map({"fit": "fitted on", "predicted": "out of sample"}),
            "plain_ms": table["plain_ms"].round(2),
            "plain_miss_pct": (100 * table["plain_before_miss"]).round(0).astype("Int64"),
            "spread_floor_ms": table["spread_floor_ms"].round(2),
            "check": [
                gain_flag(max(g, hi), a)
                for g, hi, a in zip(table["gain"], table["gain_high"], table["accept_length"], strict=True)
            ],
            "run": table["run"],
            "provenance": table["provenance"],
        }
    )


def speculative_time_beside_fit(view: pd.DataFrame) -> pd.DataFrame:
    """Per run priced by another run's fit: each speculative cell's measured time per token over the fit run's at
    the same drafter, chain, accept length and streams (1: the two runs' speculative servers ran alike)."""
    keys = ["drafter", "draft_tokens", "accept_target", "streams"]
    rows = []
    for run_id, part in view[view["run_id"] != view["fitted_run"]].groupby("run_id"):
        fitted = view[view["run_id"] == part["fitted_run"].iloc[0]]
        merged = part.merge(fitted, on=keys, suffixes=("", "_fit"))
        ratio = merged["spec_tokens_per_s_fit"] / merged["spec_tokens_per_s"]
        if ratio.empty:
            continue
        rows.append(
            {
                "run": run_id,
                "fitted_run": part["fitted_run"].iloc[0],
                "plain_routing": part["plain_routing"].iloc[0],
                "cells": len(merged),
                "median_ratio": float(ratio.median()),
                "within_10_pct": int(((ratio - 1).abs() <= 0.10).sum()),
                "ratio_low": float(ratio.min()),
                "ratio_high": float(ratio.max()),
                "provenance": "measured",
            }
        )
    return pd.DataFrame(rows)


def calibration_effect(runs: MeasuredRuns) -> pd.DataFrame:
    """Per grid priced by another run's fit whose plain decoding routed as that fit's did: the median |error| of the
    speculative tok/s predicted with the fit's overheads, and with its host overhead calibrated to this grid's own
    one-stream plain rate (as ``verifylab box`` calibrates to a box's): a calibration should move predictions toward
    the grid's measurements."""
    rows = []
    for run_id in grid_runs(runs):
        fit = fit_for(stored_runs(runs), run_id)
        if fit is None or fit.run_id == run_id or grid_routing(runs, run_id) is not fit.routing:
            continue
        measured = sweeps(runs, run_id)
        plain = dict(next(s.ms_per_token for s in measured if s.drafter is None))
        if 1 not in plain:
            continue  # no one-stream rate to calibrate to
        calibrated = calibrate_decode(fit.box, fit.overheads, 1e3 / plain[1], f"grid {run_id}")
        errors = {}
        for name, overheads in (("fitted", fit.overheads), ("calibrated", calibrated.overheads)):
            misses = []
            for sweep in measured:
                if sweep.drafter is None:
                    continue
                predicted = gains(
                    fit.box,
                    overheads,
                    sweep.drafter,
                    sweep.accept_target,
                    sweep.draft_tokens,
                    [c for c, _ in sweep.ms_per_token],
                )
                for (c, ms), row in zip(sweep.ms_per_token, predicted, strict=True):
                    mid = (row.spec_tokens_per_s.low + row.spec_tokens_per_s.high) / 2
                    misses.append(abs(mid / (c * 1e3 / ms) - 1))
            errors[name] = float(np.median(misses))
        rows.append(
            {
                "run": run_id,
                "fitted_run": fit.run_id,
                "fitted_median_error": errors["fitted"],
                "calibrated_median_error": errors["calibrated"],
                "provenance": "measured, modelled",
            }
        )
    return pd.DataFrame(rows)
