"""#50: fusion's saving on the live TP-2 passes beside the pass model's — the fused kernel's in-pass factor fitted on
the synthetic and the live traces together (each within 25 %), and a fit without the run that never reads its
fusion variant — and the chapter states the measured saving beside both."""

from __future__ import annotations

import pytest

from verifylab.chapters import ch03_verify_breakdown as ch03
from verifylab.model.fits.in_pass import fused_in_pass_fit
from verifylab.model.fits.live_fusion import live_fusion_check, live_fusion_finding
from verifylab.model.inputs.stored import stored_runs
from verifylab.sources import MeasuredRuns
from verifylab.store.evidence import Evidence

CAMPAIGNS = ("20261130-074200-2xh200-comm", "20261130-142600-2xh200-comm")
LIVE = "20261130-130757-2xh200-live-tp2"


def _runs(ev: Evidence, fusion_scale: float) -> MeasuredRuns:
    measured = ev.measured
    frames = {r: {t: measured.read_table(r, t) for t in ("allreduce_latency", "verify_pass", "verify_pass_trace")}
              for r in CAMPAIGNS}  # fmt: skip
    steps = measured.read_table(LIVE, "trace_steps")
    fusion = steps["variant"] == "fusion"
    steps.loc[fusion, "comm_transfer_us"] = steps.loc[fusion, "comm_transfer_us"] * fusion_scale
    frames[LIVE] = {"trace_steps": steps}
    return MeasuredRuns.of_frames(frames)


def test_the_left_out_prediction_never_reads_the_fusion_variant_and_the_fit_does(shipped):
    ev = shipped
    as_stored, slower = live_fusion_check(stored_runs(_runs(ev, 1.0))), live_fusion_check(stored_runs(_runs(ev, 1.5)))
    assert len(as_stored) == 1 and len(slower) == 1
    assert slower["measured_saving_us"].iloc[0] < as_stored["measured_saving_us"].iloc[0]  # the measurement moved
    assert slower["predicted_left_out_us"].iloc[0] == pytest.approx(as_stored["predicted_left_out_us"].iloc[0])
    assert slower["fitted_factor"].iloc[0] > as_stored["fitted_factor"].iloc[0]  # the fit reads every trace


def test_the_pass_model_meets_every_stored_two_gpu_fused_saving_within_25_percent(shipped):
    from verifylab.model.fits.pass_check import saving_check

    runs = shipped.measured
    live = live_fusion_check(stored_runs(runs))
    assert len(live) >= 3 and (live["error_pct"].abs() <= 25).all(), live[["run", "error_pct"]]
    synthetic = saving_check(stored_runs(runs))
    fused = synthetic[synthetic["variant"] == "fused"]
    assert len(fused) >= 3 and (fused["error_pct"].abs() <= 25).all(), fused
    fit = fused_in_pass_fit(stored_runs(runs))
    assert {p.kind for p in fit.points} == {"synthetic pass", "live SGLang pass"}
    assert fit.at(8192) < fit.at(57344)  # the live kernels ran below their isolated latency, the synthetic above


def test_the_chapter_states_measured_beside_predicted(shipped):
    ev = shipped
    check = live_fusion_check(stored_runs(ev.measured))
    assert len(check) >= 3 and (check["measured_saving_us"] > 0).all()
    text = live_fusion_finding(check, fused_in_pass_fit(stored_runs(ev.measured)))
    assert f"{check['measured_saving_us'].min():.1f}" in text and "custom all-reduce" in text
    assert str(ch03.live_fusion_finding_text(ev)) == text
    assert "measured saving (µs per pass)" in ch03.live_fusion_table(ev).frame.columns


def test_model_pass_with_the_collective_the_box_ran_gives_the_live_prediction(shipped, repo_root, monkeypatch):
    """`model pass --unfused-us` is the same pricing as the live check: the campaign's curves, the fitted factor at
    the run's message, the baseline's custom all-reduce per call."""
    import json

    from typer.testing import CliRunner

    from verifylab.cli import app
    from verifylab.model.inputs.traces import live_pairs

    monkeypatch.chdir(repo_root)
    runs = shipped.measured
    row = live_fusion_check(stored_runs(runs)).iloc[0]
    pair = next(p for p in live_pairs(runs) if p.run == row["run"])
    base = pair.baseline
    campaign = runs.newest_with("allreduce_latency", "verify_pass")
    args = ["model", "pass", "--compute-ms", "1", "--tokens", "1", "--hidden", str(int(base.message_bytes // 2))]
    args += ["--latency", campaign, "--path", "nvlink", "--allreduces", str(pair.fusion.fused), "--json"]
    args += ["--norm-us", str(base.norm_call_us), "--unfused-us", str(base.call_us)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    passes = {v["name"]: v["pass_ms"] for v in json.loads(result.output)["variants"]}
    assert 1e3 * (passes["nccl"] - passes["fused"]) == pytest.approx(row["predicted_as_run_us"])
    bad = CliRunner().invoke(app, [*args[:-2], "--unfused-us", "nan"])
    assert bad.exit_code == 2 and "--unfused-us nan" in bad.output


def test_the_in_pass_fit_holds_its_ends_and_reads_one_size_as_a_mean():
    from verifylab.model.fits.in_pass import fit_in_pass
    from verifylab.model.inputs.traces import InPassPoint

    two = fit_in_pass([InPassPoint("a", "live SGLang pass", 1000, 0.5), InPassPoint("b", "synthetic pass", 8000, 1.1)])
    assert two.at(1000) == pytest.approx(0.5) and two.at(8000) == pytest.approx(1.1)
    assert two.at(10) == pytest.approx(0.5) and two.at(1e9) == pytest.approx(1.1)  # held, not extrapolated
    assert 0.5 < two.at(3000) < 1.1 and two.spread == pytest.approx(0.0)
    one = fit_in_pass([InPassPoint("a", "synthetic pass", 1000, 0.9), InPassPoint("b", "synthetic pass", 1000, 1.1)])
    assert one.at(5) == pytest.approx(1.0) and one.range_at(5) == pytest.approx((0.9, 1.1))
    assert fit_in_pass([]).at(123) == 1.0 and "isolated latency used" in fit_in_pass([]).source()
