"""Traces that would give a silently wrong breakdown (#17 items 9 and 13): a time that is not a number is one line
naming the file and the event; ranks that disagree (steps, all-reduces per step) say so in the notes."""

from __future__ import annotations

import math

import pytest

from verifylab.errors import TraceError
from verifylab.trace import summarize_traces

from ..tracefactory import event, write_trace

AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def rank_trace(tmp_path, rank: int, allreduces: list[int]):
    events = []
    for step, n in enumerate(allreduces):
        t = step * 1000.0
        events.append(event(f"ProfilerStep#{step}", "user_annotation", t, 900))
        events += [event(AR, "kernel", t + 10 + 20 * i, 5, tid=7) for i in range(n)]
    return write_trace(tmp_path / f"x-TP-{rank}.trace.json", events)


@pytest.mark.parametrize("bad", ["abc", math.nan, None])
def test_a_time_that_is_not_a_number_is_named(tmp_path, bad):
    events = [event("ProfilerStep#0", "user_annotation", 0, 900), event(AR, "kernel", 10, 5, tid=7)]
    events[1]["ts"] = bad if bad is not None else "12us"
    path = write_trace(tmp_path / "bad.json", events)
    with pytest.raises(TraceError) as info:
        summarize_traces([path], workers=1)
    message = str(info.value)
    assert message.startswith(f"{path}: event 'ncclDevKernel_AllReduce") and "'ts' is" in message
    assert "\n" not in message


def test_ranks_that_disagree_are_noted(tmp_path):
    same = summarize_traces([rank_trace(tmp_path, 0, [4, 4]), rank_trace(tmp_path, 1, [4, 4])], workers=1)
    assert not any("ranks" in n for n in same.notes)
    (tmp_path / "b").mkdir()
    lost = summarize_traces([rank_trace(tmp_path / "b", 0, [4, 4]), rank_trace(tmp_path / "b", 1, [4, 3])], workers=1)
    assert any(
        "1 step(s) with different all-reduce counts across ranks (step 1: rank 0: 4, rank 1: 3)" in n
        for n in lost.notes
    )
    (tmp_path / "c").mkdir()
    short = summarize_traces([rank_trace(tmp_path / "c", 0, [4, 4]), rank_trace(tmp_path / "c", 1, [4])], workers=1)
    assert any("different numbers of steps (rank 0: 2, rank 1: 1)" in n for n in short.notes)
