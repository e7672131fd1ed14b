"""#50: fusion's saving on the live TP-2 passes is checked out of sample — the pass model's predictions read the
campaign's curves, the synthetic passes' in-pass factor and the baseline's own trace, never the fusion variant's —
and the chapter states the measured saving beside both predictions."""

from __future__ import annotations

import pytest

from verifylab.chapters import ch03_verify_breakdown as ch03
from verifylab.model.live_fusion import live_fusion_check, live_fusion_finding
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


def test_the_prediction_never_reads_the_fusion_variant(repo_root):
    ev = Evidence(repo_root / "data")
    as_stored, slower = live_fusion_check(_runs(ev, 1.0)), live_fusion_check(_runs(ev, 1.5))
    assert len(as_stored) == 1 and len(slower) == 1
    assert slower["measured_saving_us"].iloc[0] < as_stored["measured_saving_us"].iloc[0]  # the measurement moved
    for column in ("predicted_nccl_unfused_us_low", "predicted_as_run_us_high"):
        assert slower[column].iloc[0] == pytest.approx(as_stored[column].iloc[0])  # the predictions did not


def test_the_chapter_states_measured_beside_predicted(repo_root):
    ev = Evidence(repo_root / "data")
    check = live_fusion_check(ev.measured)
    assert len(check) >= 3 and (check["measured_saving_us"] > 0).all()
    text = live_fusion_finding(check)
    assert f"{check['measured_saving_us'].min():.1f}" in text and "custom all-reduce" in text
    assert str(ch03.live_fusion_finding_text(ev)) == text
    assert "measured saving (µs per pass)" in ch03.live_fusion_table(ev).frame.columns
