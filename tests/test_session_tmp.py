"""Tests own their temporary folders (#54 item 2): each session makes a fresh one and removes only its own, so two
test sessions on one machine (two clones, a worktree) never empty each other's. At dc55d9b every session emptied the
shared ``$TMPDIR/verifylab-tests-<uid>`` at start, and a second session broke the first (42 failed, 64 errors)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SESSION_TMP

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # starts a second pytest session: make test
def test_a_second_session_leaves_this_ones_folder_alone(tmp_path):
    mine = tmp_path / "still-here.txt"
    mine.write_text("x")
    probe = ROOT / "tests" / "_probe_session_tmp.py"
    probe.write_text("import os\n\ndef test_where():\n    print('TMP', os.environ['TMPDIR'])\n", encoding="utf-8")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(probe)],
            capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
            env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},  # a session, not a worker
        )  # fmt: skip
    finally:
        probe.unlink()
    assert done.returncode == 0, done.stdout + done.stderr
    theirs = Path(next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("TMP")))
    assert theirs != SESSION_TMP and not theirs.exists()  # its own folder, removed with it
    assert mine.read_text() == "x" and SESSION_TMP.is_dir()  # ours untouched


def test_this_session_writes_only_into_its_own_folder():
    assert os.environ["TMPDIR"] == str(SESSION_TMP) and SESSION_TMP.is_dir()
    assert SESSION_TMP.name.startswith(("verifylab-tests-", "w-gw"))


@pytest.mark.slow  # starts a second pytest session with two workers: make test
def test_a_file_left_in_a_workers_folder_fails_the_whole_session():
    """Under xdist a worker's own verdict is lost: the controller reads every worker's folder and fails the session,
    naming what was left and where."""
    probe = ROOT / "tests" / "_probe_worker_leftover.py"
    probe.write_text(
        "import tempfile\nfrom pathlib import Path\n\n"
        "def test_leaves_a_file():\n    Path(tempfile.gettempdir(), 'left-by-a-test.txt').write_text('x')\n\n"
        "def test_leaves_nothing():\n    pass\n",
        encoding="utf-8",
    )
    before = set(SESSION_TMP.glob("verifylab-tests-*"))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", str(probe)],
            capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
            env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},  # a session, not a worker
        )  # fmt: skip
    finally:
        probe.unlink()
        for kept in set(SESSION_TMP.glob("verifylab-tests-*")) - before:  # a failing session keeps its folder
            shutil.rmtree(kept)
    assert done.returncode != 0 and "2 passed" in done.stdout, done.stdout + done.stderr
    assert "tests left 1 item(s)" in done.stdout and "/left-by-a-test.txt" in done.stdout, done.stdout
