"""Issue 70, stale book: a run folder that gets its ``manifest.json`` after a build (an rsync that sends the tables
first, a run being written through a temp file, a fleet unpack that makes the folder first) re-executes the chapters
that looked for runs. At 7ac0507 the runs folder's listing was recorded as a chapter's read but the question "does
this folder hold a manifest?" was not, so the next build reused every chapter ("executed: none") and no chapter table
listed the run. The boundary: ``iorw.file_exists`` (every existence check the store makes is an audit event that
``publish.chapter_reads.track`` records as a read of that file)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from verifylab.publish.chapter_reads import Reads, read_log, reads_digest
from verifylab.store.digests import data_files

READER = """
import sys
from verifylab.publish.chapter_reads import track
track(sys.argv[1], sys.argv[2])
from verifylab.store.runs import RunStore
print(len(RunStore(sys.argv[1] + "/runs").summary()))
"""


def _chapter_reads(data: Path, log: Path) -> Reads:
    """What a chapter that lists the stored runs read, as a build records it (a fresh process: the audit hook
    stays for its life)."""
    log.unlink(missing_ok=True)
    out = subprocess.run([sys.executable, "-c", READER, str(data), str(log)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    reads = read_log(log)
    assert reads is not None, "the tracker wrote no log"
    return reads


def _digest(data: Path, reads: Reads) -> str:
    """The recorded reads digested over the data as it is now: what the next build compares (``unchanged``)."""
    return reads_digest(data, reads, [str(p.relative_to(data)) for p in data_files(data)])


def _manifest(run_id: str) -> str:
    return json.dumps(
        {
            "schema_version": 2,
            "run_id": run_id,
            "label": "H200, SM90",
            "created": "2026-12-05T00:00:00+00:00",
            "host": "box",
            "gpu_name": "NVIDIA H200",
            "compute_capability": "9.0",
            "gpu_count": 1,
            "interconnect": "single GPU",
            "driver": None,
            "cuda": None,
            "versions": {},
            "git_commit": None,
            "campaign": "live-smoke",
        }
    )


def _rsync_tables_first(run: Path) -> None:
    run.mkdir(parents=True)
    (run / "single_stream.csv").write_text("a\n1\n")


def _temp_then_rename(run: Path) -> None:
    run.mkdir(parents=True)
    (run / "manifest.json.tmp-4821").write_text(_manifest(run.name)[:40])  # a writer part-way through


def _fleet_unpack_folder_first(run: Path) -> None:
    run.mkdir(parents=True)


@pytest.mark.parametrize(
    "arrives", [_rsync_tables_first, _temp_then_rename, _fleet_unpack_folder_first], ids=lambda f: f.__name__[1:]
)
def test_a_manifest_that_arrives_after_a_build_changes_what_the_chapter_read(tmp_path, arrives):
    data = tmp_path / "data"
    (data / "runs" / "20261204-000000-earlier").mkdir(parents=True)
    (data / "runs" / "20261204-000000-earlier" / "manifest.json").write_text(_manifest("20261204-000000-earlier"))
    run = data / "runs" / "20261205-000000-late"
    arrives(run)
    reads = _chapter_reads(data, tmp_path / "log")  # the build
    built = _digest(data, reads)

    for temp in run.glob("manifest.json.tmp-*"):
        temp.unlink()
    (run / "manifest.json").write_text(_manifest(run.name))
    assert _digest(data, reads) != built  # the next build executes the chapter again


def test_nothing_arriving_changes_nothing(tmp_path):
    data = tmp_path / "data"
    _rsync_tables_first(data / "runs" / "20261205-000000-late")
    reads = _chapter_reads(data, tmp_path / "log")
    built = _digest(data, reads)
    (data / "runs" / "20261205-000000-late" / "notes.txt").write_text("not a manifest")
    assert _digest(data, reads) == built  # a file no reader asked about re-executes nothing
