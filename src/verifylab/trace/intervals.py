"""Interval arithmetic on trace events: covered length, overlap, the outermost of nested ranges, lookup."""

from __future__ import annotations

from collections import defaultdict

from verifylab.trace.reader import Event


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by a set of [start, end) intervals."""
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def overlap_length(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Length of the intersection of two interval sets."""
    a, b = merged(a), merged(b)
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
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
    lo, hi = 0, len(starts)
    while lo < hi:
        mid = (lo + hi) // 2
        if starts[mid] <= ts:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1 if lo > 0 else None
