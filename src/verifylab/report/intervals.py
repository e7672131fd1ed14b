"""How a measured throughput's interval is shown: its method and coverage named in the column header (an
order-statistic interval of 3 runs covers 75 %, not 95 %), never "ci95" for what is not one; and the variation
of one configuration between runs, which the within-run intervals do not capture."""

from __future__ import annotations

import json

import pandas as pd


def order_statistic_header(runs: int | None, coverage: float | None) -> str:
    """``median's order-statistic interval, 3 runs, 75 % coverage`` (what a header says of its interval); a run
    stored before the harness recorded coverage says that instead of guessing its method."""
    runs = int(runs) if runs is not None and runs == runs else runs  # a concatenated column may hold 3.0
    if coverage is None or coverage != coverage:
        return f"median's interval as stored, {runs} runs (method and coverage not recorded by that harness)"
    return f"median's order-statistic interval, {runs} runs, {coverage * 100:.3g} % coverage"


def single_stream_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """Single-stream rows (``interval_*`` columns, as the store reads every schema) with the interval's method
    and coverage in the headers when every row shares them, else in an ``interval`` column per row; tok/s
    everywhere, so the median and its interval print to the same decimals."""
    out = frame
    if "interval_low" not in out.columns:
        return out
    runs = out["runs"] if "runs" in out.columns else pd.Series([None] * len(out), index=out.index)
    coverage = out.get("interval_coverage", pd.Series([None] * len(out), index=out.index))
    methods = [order_statistic_header(r, c) for r, c in zip(runs, coverage, strict=True)]
    if len(set(methods)) == 1:
        name = methods[0]
        renamed = {"interval_low": f"{name}: low_tokens_per_s", "interval_high": f"{name}: high_tokens_per_s"}
        out = out.rename(columns=renamed)
    else:
        out = out.assign(interval=methods).rename(
            columns={"interval_low": "interval_low_tokens_per_s", "interval_high": "interval_high_tokens_per_s"}
        )
    return out.drop(columns=[c for c in ("interval_coverage",) if c in out.columns])


BOOTSTRAP_HEADER = "mean per request, bootstrap 95 % interval"


def sweep_intervals(cells: pd.DataFrame) -> pd.DataFrame:
    """Sweep cells with the stored per-request interval (``per_request_tokens_per_s_ci95``: a 95 % percentile
    bootstrap of the mean per-request tok/s) as two numeric columns whose header says so."""
    column = "per_request_tokens_per_s_ci95"
    if column not in cells.columns:
        return cells
    bounds = [json.loads(v) if isinstance(v, str) else v for v in cells[column]]
    low = [b[0] if isinstance(b, list) and b else None for b in bounds]
    high = [b[1] if isinstance(b, list) and len(b) > 1 else None for b in bounds]
    out = cells.drop(columns=[column])
    columns = list(out.columns)
    at = columns.index("output_tokens_per_s") + 1 if "output_tokens_per_s" in columns else len(columns)
    out.insert(at, f"{BOOTSTRAP_HEADER}: low_tokens_per_s", low)
    out.insert(at + 1, f"{BOOTSTRAP_HEADER}: high_tokens_per_s", high)
    return out


def between_run_variation(single: pd.DataFrame) -> pd.DataFrame:
    """Per configuration (variant and run label: hardware, TP, model) measured in several runs: the runs' medians
    (lowest, highest) and their spread as a share of the lowest — the run-to-run variation that a within-run
    interval does not capture."""
    median = "median_output_tokens_per_s"
    if single.empty or median not in single.columns or "run_id" not in single.columns:
        return pd.DataFrame()
    keys = ["variant", "label"] if "label" in single.columns else ["variant"]
    rows = []
    for key, group in single.groupby(keys, sort=False):
        variant = key[0] if isinstance(key, tuple) else key
        values = group[median].dropna()
        if group["run_id"].nunique() < 2 or values.empty:
            continue
        low, high = float(values.min()), float(values.max())
        rows.append(
            {
                "variant": variant,
                "configuration": group["label"].iloc[0] if "label" in group else None,
                "runs": int(group["run_id"].nunique()),
                "lowest_median_tokens_per_s": low,
                "highest_median_tokens_per_s": high,
                "spread_pct": (high - low) / low * 100 if low else None,
                "run_ids": ", ".join(sorted(group["run_id"].unique())),
            }
        )
    return pd.DataFrame(rows)
