"""The cycle account: the figures paired as the case study reported them (30 ms, accept ~2.0 and 60 tok/s), the
rates before the jump as a stated range, every derived quantity from it, nothing solved so a figure comes out."""

from __future__ import annotations

import pandas as pd
import pytest

from verifylab.model.case.cycle import cycle_account
from verifylab.model.case.reconcile import reconcile
from verifylab.model.case.speculation import inputs
from verifylab.model.inputs.stored import stored_inputs
from verifylab.span import Span
from verifylab.store.evidence import Evidence


@pytest.fixture(scope="module")
def ev(shipped) -> Evidence:
    return shipped


def with_figures(ev: Evidence, **values: float) -> Evidence:
    """The same evidence with some reported figures changed (a what-if on the inputs)."""
    changed = Evidence(ev.data_dir)
    figures = ev.figures.copy()
    for figure_id, value in values.items():
        figures.loc[figures.figure_id == figure_id, "value"] = value
    changed.__dict__["figures"] = figures
    return changed


def test_the_figures_are_paired_as_reported_and_the_before_rates_are_a_range(ev):
    a = cycle_account(stored_inputs(ev))
    draft = 2.0 / 60 * 1e3 - 30  # the session that reported 30 ms, ~2.0 and 60 tok/s
    assert sorted(r.accept / r.cycle_before_ms * 1e3 for r in a.readings) == pytest.approx([54.1, 54.8])
    assert all(r.draft_ms == pytest.approx(draft) for r in a.readings)
    assert a.accept.low == a.accept.high == 2.0
    assert a.verify_share_consistent == pytest.approx(30 / (2.0 / 60 * 1e3))  # 90 %, reported 97 %
    assert a.bottom_line_pct == pytest.approx((96.1 / 92.6 - 1) * 100)
    assert a.text("bottom_line_pct") == "3.8 %"


def test_removed_kernel_fusion_upgrade_and_remainder(ev):
    a = cycle_account(stored_inputs(ev))
    removed = [2.0 * (1 / before - 1 / 96.1) * 1e3 for before in (54.8, 54.1)]
    assert (a.removed_ms.low, a.removed_ms.high) == pytest.approx(tuple(removed))
    norm = ev.runs.read_table(ev.newest_with("norm_fusion"), "norm_fusion").set_index("tokens").loc[4, "fused_us"]
    assert a.kernel_fusion_ms == pytest.approx(122 * norm / 1e3)  # SGLang's one fused norm kernel, not PyTorch's
    upgrade_high = 2.0 / 54.1 * 1e3 * (1 - 89.5 / 92.6)
    assert (a.upgrade_ms.low, a.upgrade_ms.high) == pytest.approx((0.0, upgrade_high))
    assert a.remainder_ms.low == pytest.approx(removed[0] - a.kernel_fusion_ms - upgrade_high)
    assert a.remainder_ms.high == pytest.approx(removed[1] - a.kernel_fusion_ms)
    assert a.text("removed_ms") == f"{removed[0]:.1f}-{removed[1]:.1f} ms"


def test_nothing_is_solved_to_reproduce_the_gain(ev):
    """A different 'after' figure moves the removed time and the remainder, never the measured factors."""
    base, other = (
        cycle_account(stored_inputs(ev)),
        cycle_account(stored_inputs(with_figures(ev, eagle3_fusion_96_1=80.0))),
    )
    assert other.removed_ms.high < base.removed_ms.high
    assert other.kernel_fusion_ms == base.kernel_fusion_ms and other.upgrade_ms == base.upgrade_ms
    assert other.remainder_ms.high == pytest.approx(other.removed_ms.high - other.kernel_fusion_ms)


def test_the_reconciliation_follows_the_figures(ev):
    changed = with_figures(ev, verify_allreduce_ms=12.2)
    record = stored_inputs(changed)
    table = reconcile(record, cycle_account(record), inputs(record)).set_index("step")
    assert table.loc["latency per all-reduce in verify", "value"] == pytest.approx(100.0)
    assert table.loc["all-reduces per forward", "value"] == 122
    row = table.loc["unexplained remainder"]
    assert row["low"] <= row["value"] <= row["high"] and "not attributed" in row["verdict"]
    assert table.loc["the bottom line", "value"] == pytest.approx((96.1 / 92.6 - 1) * 100)


def test_span_text_collapses_when_both_ends_agree():
    assert Span(2.0, 2.04).text(1, "ms") == "2.0 ms"
    assert Span(13.46, 16.16).text(1, "ms") == "13.5-16.2 ms"
    assert Span(5, 3) == Span(3, 5)
    assert isinstance(pd.DataFrame([{"x": Span(1, 2).text()}]), pd.DataFrame)
    assert Span(0.5, 1.0).gain_text(1) == "a gain of 0.5-1.0 ms"
    assert Span(-3.8, 1.3).gain_text(1) == "anything from a 3.8 ms loss to a 1.3 ms gain"
    assert Span(-2.0, -1.0).gain_text(1) == "a loss of 1.0-2.0 ms"


def test_findings_reconciliation_and_account_carry_the_same_values(ev):
    from verifylab.publish.finding import FindingKey, by_key
    from verifylab.publish.findings import key_findings

    a = cycle_account(stored_inputs(ev))
    found = by_key(key_findings(ev))
    assert found[FindingKey.CYCLE_TIME_REMOVED_MS].text == a.text("removed_ms")
    assert found[FindingKey.UNEXPLAINED_REMAINDER_MS].text == a.text("remainder_ms")
    assert found[FindingKey.KERNEL_FUSION_SHARE_MS].text == a.text("kernel_fusion_ms")
    assert FindingKey.SUBSTITUTION_SHARE_MS.value not in found  # nothing is attributed to a remainder any more
    table = reconcile(stored_inputs(ev), a, inputs(stored_inputs(ev))).set_index("step")
    for step, span in (
        ("cycle time removed by the reported jump", a.removed_ms),
        ("unexplained remainder", a.remainder_ms),
    ):
        assert (table.loc[step, "low"], table.loc[step, "high"]) == pytest.approx((span.low, span.high))
