"""The CPU of every process a command starts, orphans included: the caller becomes their sub-reaper.

A process's CPU reaches its parent's ``getrusage(RUSAGE_CHILDREN)`` only when the parent waits for it. Chromium's
renderers and a daemon's children are orphaned (re-parented) before they end, so the CPU a command reports through
its children leaves theirs out: a PDF print of the book's 18 pages read 5.5 CPU-s that way and 15.7 from
``/proc/stat`` on an idle machine. With ``PR_SET_CHILD_SUBREAPER`` every orphan of the command is re-parented to this
process and waited for here (Linux only)."""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Every orphan of this process's descendants is re-parented to it from now on (exits where Linux refuses)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(ctypes.get_errno())} (Linux only)")


def children_cpu() -> float:
    """User + system CPU seconds of every child waited for so far (their own waited-for children included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wait_reaping(run: subprocess.Popen, linger_s: float = 30.0) -> tuple[int, int, float]:
    """Wait for ``run``, and meanwhile for every adopted orphan as it ends (else it stays a zombie, which a check
    that a process is gone reads as still running); then for those still running, up to ``linger_s``. Returns
    ``run``'s exit code, how many orphans were waited for and when ``run`` ended (``time.perf_counter``)."""
    exit_code, orphans, ended = None, 0, 0.0
    while exit_code is None:
        pid, status = os.waitpid(-1, 0)
        if pid == run.pid:
            exit_code, ended = os.waitstatus_to_exitcode(status), time.perf_counter()
            run.returncode = exit_code
        else:
            orphans += 1
    deadline = time.monotonic() + linger_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.1)
        else:
            orphans += 1
    return exit_code, orphans, ended


def run_counted(
    command: Sequence[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    capture: bool = False,
    timeout_s: float | None = None,
) -> tuple[int, float, float, str]:
    """``command`` run to its end (killed past ``timeout_s``): its exit code, its wall seconds, the CPU seconds of
    every process it started (call :func:`become_subreaper` first) and, with ``capture``, its standard output and
    error together."""
    before, start = children_cpu(), time.perf_counter()
    out = subprocess.PIPE if capture else None
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT if capture else None, text=True
    ) as run:
        watchdog = threading.Timer(timeout_s, run.kill) if timeout_s else None
        if watchdog:
            watchdog.start()
        said = run.stdout.read() if run.stdout is not None else ""  # read before waiting: a full pipe blocks it
        exit_code, _, ended = wait_reaping(run)
        if watchdog:
            watchdog.cancel()
    return exit_code, ended - start, children_cpu() - before, said
