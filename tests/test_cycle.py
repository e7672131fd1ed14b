"""The cycle account: both readings of the reported cycle, every derived quantity from it, nothing solved so a
figure comes out; the options keep norms, price what they add, and fusion stops past its token limit."""

from __future__ import annotations

import pandas as pd
import pytest

from verifylab.model.cycle import Span, cycle_account
from verifylab.model.options import options_table
from verifylab.model.reconcile import reconcile
from verifylab.store.evidence import Evidence


@pytest.fixture(scope="module")
def ev(repo_root) -> Evidence:
    return Evidence(repo_root / "data")


def with_figures(ev: Evidence, **values: float) -> Evidence:
    """The same evidence with some reported figures changed (a what-if on the inputs)."""
    changed = Evidence(ev.data_dir)
    figures = ev.figures.copy()
    for figure_id, value in values.items():
        figures.loc[figures.figure_id == figure_id, "value"] = value
    changed.__dict__["figures"] = figures
    return changed


def test_each_reading_reproduces_the_reported_rate_and_they_span_the_rest(ev):
    a = cycle_account(ev)
    for r in a.readings:
        assert r.accept / r.cycle_before_ms * 1e3 == pytest.approx(54.1)
        assert r.cycle_before_ms - r.draft_ms == pytest.approx(30.0)
    assert (a.accept.low, a.accept.high) == pytest.approx((30 / 0.97 * 54.1 / 1e3, 2.0))
    assert a.cycle_before_ms.high == pytest.approx(2.0 / 54.1 * 1e3)
    assert a.cycle_before_ms.low == pytest.approx(30 / 0.97)


def test_removed_kernel_fusion_upgrade_and_remainder(ev):
    a = cycle_account(ev)
    removed = [acc * (1 / 54.1 - 1 / 96.1) * 1e3 for acc in (30 / 0.97 * 54.1 / 1e3, 2.0)]
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
    base, other = cycle_account(ev), cycle_account(with_figures(ev, eagle3_fusion_96_1=80.0))
    assert other.removed_ms.high < base.removed_ms.high
    assert other.kernel_fusion_ms == base.kernel_fusion_ms and other.upgrade_ms == base.upgrade_ms
    assert other.remainder_ms.high == pytest.approx(other.removed_ms.high - other.kernel_fusion_ms)


def test_the_reconciliation_follows_the_figures(ev):
    changed = with_figures(ev, verify_allreduce_ms=12.2)
    table = reconcile(changed, cycle_account(changed)).set_index("step")
    assert table.loc["latency per all-reduce in verify", "value"] == pytest.approx(100.0)
    assert table.loc["all-reduces per forward", "value"] == 122
    row = table.loc["unexplained remainder"]
    assert row["low"] <= row["value"] <= row["high"] and "not attributed" in row["verdict"]


def test_options_at_one_stream_start_from_the_reported_pass_and_keep_norms(ev):
    a = cycle_account(ev)
    table = options_table(ev, a, streams=1).set_index("key")
    assert table.loc["baseline", ["verify_ms", "verify_ms_low", "verify_ms_high"]].tolist() == pytest.approx([30.0] * 3)
    assert table.loc["kernel_fusion", "verify_ms"] == pytest.approx(30.0 - a.kernel_fusion_ms)
    for key in ("dp_attention", "tp4_pp2", "ep8"):  # elimination removes all-reduces, not the layers' norms
        assert table.loc[key, "norm_ms"] == pytest.approx(table.loc["baseline", "norm_ms"])
    assert table.loc["dp_attention", "allreduces_per_pass"] == 0 and table.loc["ep8", "allreduces_per_pass"] == 61
    assert (table["tokens_per_s_low"] <= table["tokens_per_s"]).all()
    assert (table["tokens_per_s"] <= table["tokens_per_s_high"]).all()


def test_fusion_stops_past_its_token_limit_and_compute_grows_as_measured(ev):
    a = cycle_account(ev)
    big = options_table(ev, a, streams=600).set_index("key")  # 600 x 4 = 2400 tokens > 2048
    assert big.loc["kernel_fusion", "norm_ms"] == pytest.approx(big.loc["baseline", "norm_ms"])
    eight = options_table(ev, a, streams=8).set_index("key")
    compute = ev.runs.read_table(ev.newest_with("shard_compute"), "shard_compute")
    fused = compute[compute.norm == "flashinfer_fused"].set_index("tokens")["pass_ms_61_layers"]
    one = options_table(ev, a, streams=1).set_index("key")
    growth = eight.loc["baseline", "compute_ms"] / one.loc["baseline", "compute_ms"]
    assert growth == pytest.approx(fused[32] / fused[4])


def test_span_text_collapses_when_both_ends_agree():
    assert Span(2.0, 2.04).text(1, "ms") == "2.0 ms"
    assert Span(13.46, 16.16).text(1, "ms") == "13.5-16.2 ms"
    assert Span(5, 3) == Span(3, 5)
    assert isinstance(pd.DataFrame([{"x": Span(1, 2).text()}]), pd.DataFrame)


def test_findings_reconciliation_and_account_carry_the_same_values(ev):
    from verifylab.publish.findings import FindingKey, by_key, key_findings

    a = cycle_account(ev)
    found = by_key(key_findings(ev))
    assert found[FindingKey.CYCLE_TIME_REMOVED_MS].text == a.text("removed_ms")
    assert found[FindingKey.UNEXPLAINED_REMAINDER_MS].text == a.text("remainder_ms")
    assert found[FindingKey.KERNEL_FUSION_SHARE_MS].text == a.text("kernel_fusion_ms")
    assert FindingKey.SUBSTITUTION_SHARE_MS.value not in found  # nothing is attributed to a remainder any more
    table = reconcile(ev, a).set_index("step")
    for step, span in (
        ("cycle time removed by 54.1 -> 96.1 tok/s", a.removed_ms),
        ("unexplained remainder", a.remainder_ms),
    ):
        assert (table.loc[step, "low"], table.loc[step, "high"]) == pytest.approx((span.low, span.high))
