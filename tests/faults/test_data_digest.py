"""Issue 53 class 3 (a stale book): at dc55d9b the data digest skipped a symlinked ``data/runs`` (an edited number or
a new run gave ``executed: none`` and the same edition id), and a FIFO in ``data/gates`` hung the build. The
boundary: ``publish.edition.data_files`` walks the data as the readers do, links followed, and refuses what is not
a regular file before a byte is read."""

from __future__ import annotations

import os

import pytest

from verifylab.errors import BookBuildError
from verifylab.store.digests import data_digest


def test_a_linked_runs_folder_is_data(tmp_path):
    real = tmp_path / "elsewhere" / "runs" / "r1"
    real.mkdir(parents=True)
    (real / "t.csv").write_text("a\n1\n")
    data = tmp_path / "data"
    data.mkdir()
    os.symlink(tmp_path / "elsewhere" / "runs", data / "runs")
    before = data_digest(data)
    (real / "t.csv").write_text("a\n2\n")  # one number edited behind the link
    assert data_digest(data) != before
    (real.parent / "r2").mkdir()
    (real.parent / "r2" / "t.csv").write_text("a\n3\n")  # a new run behind the link
    assert data_digest(data) != before


def test_a_link_back_up_is_walked_once(tmp_path):
    data = tmp_path / "data"
    (data / "gates").mkdir(parents=True)
    (data / "gates" / "m.csv").write_text("x\n")
    os.symlink(data, data / "gates" / "loop")
    assert data_digest(data)  # ends


def test_a_fifo_is_refused_before_the_build_reads_it(tmp_path):
    data = tmp_path / "data"
    (data / "gates").mkdir(parents=True)
    os.mkfifo(data / "gates" / "pipe.csv")
    with pytest.raises(BookBuildError, match=r"pipe\.csv: not a regular file"):
        data_digest(data)
