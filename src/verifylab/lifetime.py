"""Child processes that do not outlive verifylab: on Linux a child started with :func:`die_with_parent` is
killed by the kernel when the verifylab process that started it dies, however it dies (kill -9 included), so no
server keeps its port and no ``jupyter-book`` writes a build folder after the command that started it is gone."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """``preexec_fn`` for ``subprocess.Popen``: the child gets SIGKILL when its parent dies (Linux; elsewhere
    nothing: the parent's own cleanup is all there is)."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def run_tied(
    cmd: Sequence[str], *, timeout_s: float, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str] | None:
    """Run ``cmd`` to its end with its output captured as text, killed with this process (:func:`die_with_parent`);
    ``None`` when it ran past ``timeout_s`` (it is killed then)."""
    try:
        return subprocess.run(
            list(cmd),
            cwd=cwd,
            env=None if env is None else dict(env),
            capture_output=True,
            text=True,
            check=False,
            preexec_fn=die_with_parent,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return None


def die_with(pid: int) -> None:
    """For a process whose parent is not verifylab (a rank forked by a fork server): SIGKILL itself as soon as
    process ``pid`` ends, however it ends. A watcher thread waits on the process's pidfd (Linux >= 5.3)."""
    if not hasattr(os, "pidfd_open"):
        return
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # already gone
        os.kill(os.getpid(), signal.SIGKILL)
        return

    def wait_then_die() -> None:
        select.select([fd], [], [])  # readable when the process has ended
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=wait_then_die, name="die-with", daemon=True).start()
