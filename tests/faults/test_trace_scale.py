"""#31 items 2 and 3: an error early in any rank's file is found before any rank is read to its end (ranks were
read in order, two at a time: a bad byte at 200 KB of the last of 8 files came after 45 s), and steps are never
merged silently (``verify_step_0`` was not a default marker: one step per rank holding 61,488 all-reduces)."""

from __future__ import annotations

import pytest

from verifylab.errors import TraceError
from verifylab.trace import summarize_traces
from verifylab.trace.reader import HEAD_BYTES

from ..tracefactory import event, write_trace

AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def steps_trace(path, marker: str, steps: int, allreduces: int):
    events = []
    for step in range(steps):
        t = step * 10_000.0
        events.append(event(marker.format(step), "user_annotation", t, 9_000))
        events += [event(AR, "kernel", t + 10 + 20 * i, 5, tid=7) for i in range(allreduces)]
    return write_trace(path, events)


def corrupt_at(path, fraction: float) -> int:
    data = bytearray(path.read_bytes())
    at = data.index(b'"name"', int(len(data) * fraction))
    data[at : at + 6] = b'"na\x00e"'  # a NUL in a key: not JSON
    path.write_bytes(bytes(data))
    return at


def test_a_bad_byte_early_in_the_last_rank_is_reported_before_the_others_are_read(tmp_path):
    files = [steps_trace(tmp_path / f"x-TP-{r}.trace.json", "ProfilerStep#{}", 150, 120) for r in range(4)]
    assert all(f.stat().st_size > 2 * HEAD_BYTES for f in files)
    for f in files[:3]:
        corrupt_at(f, 0.95)  # late in the first ranks: found only by reading them to the end
    corrupt_at(files[3], 0.02)  # early in the last rank
    with pytest.raises(TraceError) as err:
        summarize_traces(files, workers=1)
    assert str(err.value).startswith(str(files[3]))  # the last rank's early byte is the one reported


@pytest.mark.parametrize("marker", ["verify_step_{}", "verify_step#{}", "verify_step{}", "ProfilerStep#{}"])
def test_the_common_marker_spellings_cut_steps(tmp_path, marker):
    summary = summarize_traces([steps_trace(tmp_path / "x-TP-0.trace.json", marker, 3, 122)], workers=1)
    assert len(summary.steps) == 3 and set(summary.steps["allreduce_count"]) == {122}
    assert set(summary.steps["phase"]) == {marker.format("").rstrip("#_")}
    assert not [n for n in summary.notes if "merged" in n or "no step marker" in n]


def test_merged_steps_and_a_missing_marker_are_said(tmp_path):
    merged = summarize_traces([steps_trace(tmp_path / "x-TP-0.trace.json", "pass-{}", 3, 300)], workers=1)
    assert any(n.startswith("no step marker matched") for n in merged.notes)
    assert any("several passes were merged into one step" in n and "900 all-reduces" in n for n in merged.notes)
    assert "several passes were merged" in " ".join(merged.to_json()["notes"])
