"""Statistics of measured benchmarks, pure (numbers and frames in, numbers and frames out): summaries, bootstrap
and order-statistic intervals, variant comparison, crossover concurrency, goodput SLOs and greedy-output
equivalence. Both the harness (``bench``) and the book (``report``) use them."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

BOOTSTRAP = 4000


def summarize(values: Sequence[float]) -> dict[str, float | int | None]:
    """Median, mean, standard deviation and p50/p90/p99 of a sample (None when empty)."""
    arr = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if arr.size == 0:
        return {"n": 0, "median": None, "mean": None, "std": None, "p50": None, "p90": None, "p99": None}
    return {
        "n": int(arr.size),
        "median": float(np.median(arr)),
        "mean": float(arr.mean()),
        "std": float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
        "p50": float(np.percentile(arr, 50)),
        "p90": float(np.percentile(arr, 90)),
        "p99": float(np.percentile(arr, 99)),
    }


def median_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float] | None:
    """Distribution-free interval of the median from order statistics, with its exact coverage: the narrowest
    [x(j), x(n+1-j)] whose coverage 1 - 2 P(Bin(n, 1/2) < j) reaches ``level``, else min-max with the coverage
    it has (n = 5: 93.8 %, n = 3: 75 %). None below two values: one sample has no interval."""
    arr = np.sort(np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float))
    n = int(arr.size)
    if n < 2:
        return None

    def coverage(j: int) -> float:
        return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(j)) / 2.0**n

    j = 1
    while j + 1 <= n // 2 and coverage(j + 1) >= level:
        j += 1
    return float(arr[j - 1]), float(arr[n - j]), coverage(j)


def bootstrap_ci(
    values: Sequence[float], stat: Callable = np.median, level: float = 0.95, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``stat`` (fixed seed: the same data give the same interval)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return None
    if arr.size == 1:
        return (float(arr[0]), float(arr[0]))
    rng = np.random.default_rng(seed)
    samples = stat(rng.choice(arr, size=(BOOTSTRAP, arr.size), replace=True), axis=1)
    alpha = (1 - level) / 2
    return float(np.quantile(samples, alpha)), float(np.quantile(samples, 1 - alpha))


def compare(
    reference: Sequence[float],
    candidate: Sequence[float],
    stat: Callable = np.median,
    level: float = 0.95,
    seed: int = 0,
) -> dict:
    """Ratio candidate / reference of ``stat`` with a bootstrap interval; resolved when it excludes 1."""
    ref, cand = np.asarray(reference, dtype=float), np.asarray(candidate, dtype=float)
    if ref.size == 0 or cand.size == 0:
        return {"ratio": None, "ci": None, "resolved": False, "verdict": "no data"}
    rng = np.random.default_rng(seed)
    r = stat(rng.choice(ref, size=(BOOTSTRAP, ref.size)), axis=1)
    c = stat(rng.choice(cand, size=(BOOTSTRAP, cand.size)), axis=1)
    ratios = c / r
    alpha = (1 - level) / 2
    lo, hi = float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1 - alpha))
    ratio = float(stat(cand) / stat(ref))
    resolved = lo > 1.0 or hi < 1.0
    if not resolved:
        verdict = f"no difference resolved (ratio {ratio:.3f}, {level:.0%} CI {lo:.3f}-{hi:.3f} includes 1)"
    else:
        verdict = f"{'faster' if lo > 1 else 'slower'}: ratio {ratio:.3f} ({level:.0%} CI {lo:.3f}-{hi:.3f})"
    return {"ratio": ratio, "ci": (lo, hi), "resolved": resolved, "verdict": verdict}


def crossover(cells: pd.DataFrame, speculative: str, twin: str, metric: str = "per_request_tokens_per_s") -> dict:
    """Concurrency where ``speculative`` stops beating ``twin``.

    ``cells`` holds per-request rows with ``variant``, ``concurrency`` and ``metric``. Per concurrency the
    ratio of means is compared with a bootstrap interval. Returns the bracket (last concurrency where
    speculation is resolved faster, first where it is resolved slower), a log-interpolated estimate where the
    ratio crosses 1, and a status: ``wins everywhere``, ``loses everywhere``, ``crosses`` or ``unresolved``.
    """
    rows = []
    for c in sorted(set(cells["concurrency"])):
        a = cells[(cells.variant == twin) & (cells.concurrency == c)][metric].dropna()
        b = cells[(cells.variant == speculative) & (cells.concurrency == c)][metric].dropna()
        if a.empty or b.empty:
            continue
        cmp = compare(a.to_numpy(), b.to_numpy(), stat=np.mean)
        rows.append(
            {
                "concurrency": c,
                "ratio": cmp["ratio"],
                "ci_low": cmp["ci"][0],
                "ci_high": cmp["ci"][1],
                "resolved": cmp["resolved"],
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        return {"status": "no data", "estimate": None, "bracket": None, "table": table}
    wins = table[table.ci_low > 1.0]
    loses = table[table.ci_high < 1.0]
    if loses.empty:
        status = "wins everywhere" if len(wins) == len(table) else "unresolved"
        return {"status": status, "estimate": None, "bracket": None, "table": table}
    first_loss = int(loses.concurrency.iloc[0])
    before = wins[wins.concurrency < first_loss]
    if before.empty and first_loss == table.concurrency.iloc[0]:
        return {"status": "loses everywhere", "estimate": None, "bracket": (None, first_loss), "table": table}
    last_win = int(before.concurrency.iloc[-1]) if not before.empty else int(table.concurrency.iloc[0])
    estimate = _log_interpolate(table, last_win, first_loss)
    return {"status": "crosses", "estimate": estimate, "bracket": (last_win, first_loss), "table": table}


def _log_interpolate(table: pd.DataFrame, c_lo: int, c_hi: int) -> float:
    lo = table[table.concurrency == c_lo].ratio.iloc[0]
    hi = table[table.concurrency == c_hi].ratio.iloc[0]
    if lo == hi:
        return float(c_hi)
    t = (lo - 1.0) / (lo - hi)
    return float(2 ** (math.log2(c_lo) + t * (math.log2(c_hi) - math.log2(c_lo))))


DEFAULT_SLO = {"ttft_s": 2.0, "tpot_s": 0.05}  # goodput counts requests within these (TTFT s, TPOT s)


def first_divergence(reference: list[int] | str, candidate: list[int] | str) -> int | None:
    """Index of the first differing token (or character) of two greedy outputs; None when identical."""
    for i, (a, b) in enumerate(zip(reference, candidate, strict=False)):
        if a != b:
            return i
    return None if len(reference) == len(candidate) else min(len(reference), len(candidate))


def compare_greedy_outputs(baseline: pd.DataFrame, variant: pd.DataFrame) -> pd.DataFrame:
    """Per prompt: identical or not, and the first divergence position (fusion must not change answers)."""
    rows = []
    base = baseline.drop_duplicates("prompt_id").set_index("prompt_id")
    for row in variant.drop_duplicates("prompt_id").itertuples():
        if row.prompt_id not in base.index or not isinstance(getattr(row, "output_ids", None), str):
            continue
        ref = json.loads(base.loc[row.prompt_id, "output_ids"])
        pos = first_divergence(ref, json.loads(row.output_ids))
        rows.append({"prompt_id": row.prompt_id, "identical": pos is None, "first_divergence": pos})
    return pd.DataFrame(rows, columns=["prompt_id", "identical", "first_divergence"])
