"""Traces that would give a silently wrong breakdown (#17 items 9 and 13): a time that is not a number is one line
naming the file and the event; ranks that disagree (steps, all-reduces per step) say so in the notes. Large
traces (item 16): an early error is reported at once, progress counts every byte, kernels are kept as columns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verifylab.errors import TraceError
from verifylab.trace import summarize_traces
from verifylab.trace.steps import DEFAULT_STEP_MARKER, load_rank_events

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


def big_trace_with_an_error_near_the_start(path, events: int = 20000):
    """A valid-looking trace whose second event is broken JSON, followed by many good events."""
    good = ",".join(
        f'{{"name":"k{i}","cat":"kernel","ph":"X","ts":{i},"dur":1,"pid":0,"tid":7}}' for i in range(events)
    )
    path.write_text('{"traceEvents":[{"name":"a","ph":"X","ts":0,"dur":1},{"name": oops},' + good + "]}")
    return path


def test_an_error_near_the_start_is_reported_without_reading_the_rest(tmp_path, monkeypatch):
    from verifylab.trace import reader

    monkeypatch.setattr(reader, "CHUNK", 64 << 10)
    monkeypatch.setattr(reader, "MAX_EVENT_CHARS", 64 << 10)
    path = big_trace_with_an_error_near_the_start(tmp_path / "bad-TP-0.trace.json")
    size = path.stat().st_size
    assert size > 20 * reader.CHUNK
    read: list[int] = []
    with pytest.raises(TraceError, match=r"bad-TP-0\.trace\.json: invalid JSON at byte \d+"):
        list(reader.iter_raw(path, read.append))
    assert max(read) <= 2 * reader.CHUNK  # not the whole file


def test_progress_counts_every_byte_and_a_bad_rank_ends_the_parallel_read(tmp_path):
    good = [rank_trace(tmp_path, 0, [4, 4]), rank_trace(tmp_path, 1, [4, 4])]
    heard: list[tuple[int, int]] = []
    summarize_traces(good, workers=1, progress=lambda done, total: heard.append((done, total)))
    total = sum(p.stat().st_size for p in good)
    assert heard and heard[-1] == (total, total)
    bad = big_trace_with_an_error_near_the_start(tmp_path / "y-TP-1.trace.json", events=200)
    with pytest.raises(TraceError, match=r"y-TP-1\.trace\.json: invalid JSON"):
        summarize_traces([good[0], bad], workers=2, progress=lambda done, total: None)


def test_kernels_are_kept_as_columns_one_name_each(tmp_path):
    names = ["nvjet_gemm", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"]
    events = [event(names[i % 2], "kernel", 10.0 * i, 4.0, tid=7, correlation=i) for i in range(500)] + [
        event("cudaLaunchKernel", "cuda_runtime", 1.0, 1.0)
    ]
    rank = load_rank_events(write_trace(tmp_path / "t.json", events), 0, DEFAULT_STEP_MARKER)
    kernels = rank.kernels
    assert len(kernels) == 500 and rank.event_count == 501
    assert [name for name, _ in kernels.keys] == names  # each distinct name stored once
    assert kernels.code.dtype == np.int32 and kernels.code.tolist() == [i % 2 for i in range(500)]
    assert kernels.correlation.tolist() == list(range(500))
    assert kernels.end[-1] == 10.0 * 499 + 4.0


def test_a_negative_duration_or_message_size_is_refused(tmp_path):
    """#27 item 6: both produced negative results with exit 0."""
    from typer.testing import CliRunner

    from verifylab.cli import app

    events = [event("ProfilerStep#0", "user_annotation", 0, 900), event(AR, "kernel", 10, -5, tid=7)]
    path = write_trace(tmp_path / "neg.json", events)
    with pytest.raises(TraceError, match=r"'dur' is '-5', not a duration \(negative\)"):
        summarize_traces([path], workers=1)
    good = rank_trace(tmp_path, 0, [2])
    with pytest.raises(TraceError, match="--message-bytes -5: bytes per all-reduce must be positive"):
        summarize_traces([good], message_bytes=-5, workers=1)
    result = CliRunner().invoke(app, ["trace", "summarize", str(good), "--message-bytes", "-5"])
    assert result.exit_code == 2 and "--message-bytes" in result.output


def test_a_gzip_that_expands_a_hundredfold_is_refused_early(tmp_path):
    """#27 item 13: 2 MB of gzip expanding to 2 GB of whitespace took minutes; it is refused, naming the file."""
    import gzip

    from verifylab.trace import reader

    bomb = tmp_path / "bomb-TP-0.trace.json.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as fh:
        fh.write(b'{"traceEvents": [')
        for _ in range(96):  # 96 MB of spaces: about 400 KB compressed
            fh.write(b" " * (1 << 20))
        fh.write(b"]}")
    with pytest.raises(TraceError, match=r"bomb-TP-0\.trace\.json\.gz: [\d,]+ compressed bytes expand to more than"):
        list(reader.iter_raw(bomb))
