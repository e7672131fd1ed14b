"""How stored intervals are named: honest headers, one column per quantity when harnesses are mixed."""

import pandas as pd

from verifylab.report.intervals import order_statistic_header, single_stream_intervals


def test_header_names_the_order_statistic_coverage_not_95():
    assert order_statistic_header(3, 0.75) == "median's order-statistic interval, 3 runs, 75 % coverage"
    assert order_statistic_header(3.0, 0.75).startswith("median's order-statistic interval, 3 runs,")
    assert "not recorded" in order_statistic_header(3, None)
    assert "not recorded" in order_statistic_header(3, float("nan"))


def test_rows_of_two_harnesses_show_each_its_own_method():
    old = pd.DataFrame({"variant": ["baseline"], "interval_low": [90.0], "interval_high": [110.0], "runs": [3]})
    new = pd.DataFrame(
        {"variant": ["fusion"], "interval_low": [95.0], "interval_high": [120.0], "interval_coverage": [0.75]}
    ).assign(runs=3)
    shown = single_stream_intervals(pd.concat([old, new], ignore_index=True))
    assert shown["interval"].tolist() == [order_statistic_header(3, None), order_statistic_header(3, 0.75)]
    assert shown["interval_low_tokens_per_s"].tolist() == [90.0, 95.0]
    assert "interval_coverage" not in shown.columns


def test_one_method_for_every_row_goes_into_the_header():
    frame = pd.DataFrame({"variant": ["a", "b"], "interval_low": [1.0, 2.0], "interval_high": [3.0, 4.0]}).assign(
        interval_coverage=0.75, runs=3
    )
    shown = single_stream_intervals(frame)
    header = order_statistic_header(3, 0.75)
    assert f"{header}: low_tokens_per_s" in shown.columns
    assert "interval" not in shown.columns
