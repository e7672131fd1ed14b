"""Interval arithmetic on trace events: covered length (of one set, or of many sets at once), the outermost of
nested ranges, lookup."""

from __future__ import annotations

import bisect
from collections import defaultdict

import numpy as np
import pandas as pd

from verifylab.trace.reader import Event


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by a set of [start, end) intervals."""
    total, current = 0.0, None
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = (start, end)
        else:
            current = (current[0], max(current[1], end))
    if current is not None:
        total += current[1] - current[0]
    return total


def outermost(events: list[Event], same_thread: bool = True) -> list[Event]:
    """Drop events nested inside another of the list on the same thread (c10d op + backend op = one), or
    on any thread when ``same_thread`` is False (GPU-timeline annotations of one step)."""
    kept: list[Event] = []
    by_thread: dict[tuple, list[Event]] = defaultdict(list)
    for ev in events:
        by_thread[(ev.pid, ev.tid) if same_thread else ()].append(ev)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e.ts, -e.dur))
        current_end = -1.0
        for ev in evs:
            if ev.ts >= current_end:
                kept.append(ev)
                current_end = ev.end
            else:
                current_end = max(current_end, ev.end) if ev.end > current_end else current_end
    kept.sort(key=lambda e: e.ts)
    return kept


def last_at_or_before(starts: list[float], ts: float) -> int | None:
    """Index of the last of the sorted ``starts`` at or before ``ts``; None when ``ts`` precedes them all."""
    lo = bisect.bisect_right(starts, ts)
    return lo - 1 if lo > 0 else None


def union_lengths(key: np.ndarray, start: np.ndarray, end: np.ndarray, n_keys: int) -> np.ndarray:
    """For every key 0..n_keys-1, the length covered by the intervals carrying it (``union_length`` for many
    sets at once, in array operations: sort by key then start, a running maximum of the ends per key, a new
    segment wherever a start lies past it)."""
    if len(key) == 0:
        return np.zeros(n_keys)
    order = np.lexsort((start, key))
    k, s, e = key[order], start[order], end[order]
    reach = pd.Series(e).groupby(k).cummax().to_numpy()
    first = np.ones(len(k), dtype=bool)
    first[1:] = (k[1:] != k[:-1]) | (s[1:] > reach[:-1])
    opens = np.flatnonzero(first)
    closes = np.append(opens[1:] - 1, len(k) - 1)
    return np.bincount(k[opens], weights=reach[closes] - s[opens], minlength=n_keys)
