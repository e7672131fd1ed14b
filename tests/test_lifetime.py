"""Child processes verifylab starts to their end (``jupyter-book build``, a fleet job's ``verifylab run``) through
``lifetime.run_tied``: output captured, a deadline kept, and no child left behind by a parent that dies."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verifylab.lifetime import run_tied


def _alive(pid: int) -> bool:
    """Running, not a zombie that nobody has reaped yet (a reparented child's fate in a container)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_run_tied_returns_what_the_child_printed_and_its_exit_status():
    proc = run_tied(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], timeout_s=60
    )
    assert proc is not None
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "out\n", "err\n")


def test_run_tied_stops_a_child_past_its_deadline_and_says_so_with_none(tmp_path):
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    assert run_tied([sys.executable, "-c", code], timeout_s=1.5) is None
    assert not _alive(int(pid_file.read_text()))


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel's parent-death signal is Linux's")
def test_a_child_started_by_run_tied_dies_with_its_parent_even_on_kill_9(tmp_path):
    pid_file = tmp_path / "pid"
    child = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    parent_code = (
        "import sys; from verifylab.lifetime import run_tied; "
        f"run_tied([sys.executable, '-c', {child!r}], timeout_s=60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        child_pid = int(pid_file.read_text())
        assert _alive(child_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _alive(child_pid):
            assert time.monotonic() < deadline, "the child outlived its killed parent"
            time.sleep(0.05)
    finally:
        parent.kill()
