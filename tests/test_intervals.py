"""How stored intervals are named: honest headers, one column per quantity when harnesses are mixed."""

import pandas as pd

from verifylab.report.intervals import order_statistic_header, single_stream_intervals, with_interval_names


def test_header_names_the_order_statistic_coverage_not_95():
    assert order_statistic_header(3, 0.75) == "median's order-statistic interval, 3 runs, 75 % coverage"
    assert order_statistic_header(3.0, 0.75).startswith("median's order-statistic interval, 3 runs,")
    assert "not recorded" in order_statistic_header(3, None)
    assert "not recorded" in order_statistic_header(3, float("nan"))


def test_runs_of_old_and_new_harness_share_one_interval_column():
    old = pd.DataFrame({"variant": ["baseline"], "ci95_low": [90.0], "ci95_high": [110.0], "ci_coverage": [0.75]})
    new = pd.DataFrame(
        {"variant": ["fusion"], "interval_low": [95.0], "interval_high": [120.0], "interval_coverage": [None]}
    )
    mixed = pd.concat([old, new], ignore_index=True).assign(runs=[3, 1])
    named = with_interval_names(mixed)
    assert list(named.columns).count("interval_coverage") == 1
    assert named["interval_low"].tolist() == [90.0, 95.0]
    assert named["interval_coverage"].iloc[0] == 0.75
    shown = single_stream_intervals(mixed)
    assert shown["interval"].tolist() == [
        order_statistic_header(3, 0.75),
        order_statistic_header(1, None),
    ]
    assert "interval_coverage" not in shown.columns


def test_one_method_for_every_row_goes_into_the_header():
    frame = pd.DataFrame({"variant": ["a", "b"], "interval_low": [1.0, 2.0], "interval_high": [3.0, 4.0]}).assign(
        interval_coverage=0.75, runs=3
    )
    shown = single_stream_intervals(frame)
    header = order_statistic_header(3, 0.75)
    assert f"{header}: low_tokens_per_s" in shown.columns
    assert "interval" not in shown.columns
