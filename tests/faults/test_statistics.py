"""The median's interval says what it covers (#17 item 8): with fewer than 6 runs no order-statistic interval
reaches 95 %, so min-max is given with its true coverage, never called a 95 % interval."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("n", "coverage"),
    [(2, 0.5), (3, 0.75), (5, 0.9375), (6, 0.96875), (9, 0.9609375), (20, 0.9586105346679688)],
)
def test_the_medians_interval_reports_its_true_coverage(n, coverage):
    """Below 6 runs no order-statistic interval reaches 95 %: min-max is given with the coverage it has."""
    from verifylab.stats import median_interval

    values = [float(v) for v in range(n, 0, -1)]
    lo, hi, cov = median_interval(values)
    assert cov == pytest.approx(coverage) and lo <= sorted(values)[(n - 1) // 2] <= hi
    if n <= 5:
        assert (lo, hi) == (1.0, float(n))
    assert median_interval([3.0]) is None and median_interval([]) is None
