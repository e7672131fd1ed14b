"""The verify pass's growth with context inside SGLang: the refit on the shorter contexts predicts the held-out longer
ones from the series' own slopes, and each stored prediction is paired with the growth its GPU measured."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from verifylab.analysis.verify_kernels import growth_check_view, growth_fit_view, growth_words
from verifylab.model.fits.verify_growth import FIT_CONTEXT_MAX, context_growth_fit, stored_growth_check
from verifylab.model.inputs.stored import stored_runs
from verifylab.sources import MeasuredRuns
from verifylab.store.evidence import Evidence

ROOT = Path(__file__).resolve().parents[1]


def _cells(series: dict[tuple[str, str, int], dict[int, float]]) -> pd.DataFrame:
    rows = []
    for (backend, mode, streams), times in series.items():
        for context, ms in times.items():
            rows.append(
                {
                    "shape": "mla36",
                    "backend": backend,
                    "mode": mode,
                    "context": context,
                    "streams": streams,
                    "step_ms": ms if mode == "plain" else float("nan"),
                    "cycle_ms": ms if mode == "eagle3" else float("nan"),
                }
            )
    return pd.DataFrame(rows)


def _runs(cells: pd.DataFrame, prediction: pd.DataFrame | None = None) -> MeasuredRuns:
    tables = {"context_cells": cells}
    if prediction is not None:
        tables["engine_growth_prediction"] = prediction
    return MeasuredRuns.of_frames({"r1": tables}, gpu_name="NVIDIA H100 80GB HBM3")


def test_a_linear_series_is_predicted_exactly_and_a_bent_one_as_a_range():
    linear = {c: 10.0 + 2.0 * (c - 2048) / 1000 for c in (2048, 8192, 16384, 65536)}  # 2 ms per 1,000 tokens
    bent = {2048: 5.0, 8192: 5.6144, 16384: 5.8, 32768: 6.0}  # slopes 0.1 then ~0.0227
    fit = context_growth_fit(
        stored_runs(_runs(_cells({("triton", "eagle3", 1): linear, ("flashinfer", "eagle3", 1): bent})))
    )
    serial = fit[fit["kernel"] == "serial"].iloc[0]
    assert serial["context"] == 65536 and serial["predicted_low_ms"] == pytest.approx(linear[65536])
    assert serial["miss"] == pytest.approx(0.0, abs=1e-9) and serial["fitted_contexts"] == "2,048, 8,192, 16,384"
    flat = fit[fit["kernel"] == "flashinfer"].iloc[0]
    added = (32768 - 16384) / 1000
    assert flat["predicted_low_ms"] == pytest.approx(5.8 + (5.8 - 5.6144) / 8.192 * added)
    assert flat["predicted_high_ms"] == pytest.approx(5.8 + 0.1 * added)
    assert flat["width"] > 1


def test_only_cells_above_the_fit_are_held_out_and_a_series_needs_two_fitted_contexts():
    one_short = {16384: 4.0, 32768: 5.0}
    fit = context_growth_fit(stored_runs(_runs(_cells({("triton", "plain", 1): one_short}))))
    assert fit.empty
    two = {2048: 4.0, FIT_CONTEXT_MAX: 5.0, 32768: 6.0}
    fit = context_growth_fit(stored_runs(_runs(_cells({("triton", "plain", 1): two}))))
    assert list(fit["context"]) == [32768] and list(fit["kernel"]) == ["decode"]


def test_a_stored_prediction_meets_the_growth_measured_between_its_contexts():
    cells = _cells({("triton-splitkv", "eagle3", 1): {2048: 8.0, 65536: 38.0}})
    prediction = pd.DataFrame(
        [["mla36", 36, "triton-splitkv", "eagle3", 1, 2048, 65536, 0.04, 1.2, "split-kv"]],
        columns=[
            "shape",
            "layers",
            "backend",
            "mode",
            "streams",
            "context_low",
            "context_high",
            "growth_low_ms",
            "growth_high_ms",
            "kernel",
        ],
    )
    check = stored_growth_check(stored_runs(_runs(cells, prediction)))
    row = check.iloc[0]
    assert (row["kernel"], row["gpu"], row["measured_ms"]) == ("split-kv", "h100", pytest.approx(30.0))
    assert stored_growth_check(stored_runs(_runs(cells.assign(context=cells["context"] * 2), prediction))).empty


def test_the_stored_runs_give_the_refit_the_verify_issue_asks_for():
    """Fitted on contexts up to 16k, the longer engine cells are predicted within a median of 15 %, every range at most
    2x wide; the words quote the median the table's cells give."""
    runs = Evidence(ROOT / "data").measured
    fit = context_growth_fit(stored_runs(runs))
    assert {"serial", "split-kv", "flashinfer"} <= set(fit["kernel"])
    assert fit["miss"].abs().median() <= 0.15 and fit["width"].max() <= 2
    assert f"{fit['miss'].abs().median() * 100:.1f} %" in growth_words(runs)
    assert len(growth_fit_view(runs)) == len(fit) and not growth_check_view(runs).empty
