"""Issue 71, a truncated trace found at once: every rank's file end is decoded before any rank is read in full, so a
last rank cut short (a copy that stopped, a full disk) is reported with the byte a full read would name, and no rank
is summarized first. At 7ac0507 only each file's first MiB was checked: a cut tail surfaced after every rank was read
(18 s quiet on 8 x 498 MB, 73-116 s under load). The boundary: ``trace.reader.check_tail``."""

from __future__ import annotations

import pytest

from verifylab.errors import TraceError
from verifylab.trace import analyze
from verifylab.trace.reader import iter_raw

from ..test_trace import long_fused_trace

RANKS = 4


def _ranks(tmp_path):
    return [long_fused_trace(tmp_path / f"x-TP-{r}.trace.json", steps=2000) for r in range(RANKS)]  # ~2.2 MB each


def _full_read_error(path) -> str:
    with pytest.raises(TraceError) as full:
        for _ in iter_raw(path):
            pass
    return str(full.value)


CUTS = {
    "last rank, inside an event": (RANKS - 1, lambda data: data[: len(data) - 300]),
    # held out: the first rank, cut inside a kernel name; another rank cut just after a comma between events
    "first rank, inside a name": (0, lambda data: data[: data.rfind(b"cross_device") + 5]),
    "a middle rank, between events": (2, lambda data: data[: data.rfind(b"},\n") + 2]),
}


@pytest.mark.parametrize("case", list(CUTS))
def test_a_cut_rank_is_reported_before_any_rank_is_read_in_full(tmp_path, monkeypatch, case):
    rank, cut = CUTS[case]
    files = _ranks(tmp_path)
    files[rank].write_bytes(cut(files[rank].read_bytes()))
    expected = _full_read_error(files[rank])

    def no_full_read(*args, **kwargs):
        raise AssertionError("a rank was read in full before the cut one was reported")

    monkeypatch.setattr(analyze, "run_jobs", no_full_read)
    with pytest.raises(TraceError) as found:
        analyze.summarize_traces([tmp_path])
    assert str(found.value) == expected  # the same file and byte a full read names


def test_whole_ranks_pass_the_tail_check(tmp_path):
    _ranks(tmp_path)
    summary = analyze.summarize_traces([tmp_path], workers=1)
    assert summary.steps["rank"].nunique() == RANKS
