"""A test double that injects faults from outside the product: run as ``python -m verifylab.testing.faults FAULT
(-m MODULE | -c CODE) ARGS...``, it installs ``FAULT`` and runs the module or the code as ``python`` would. Product
code reads no fault switch; it only has the seams patched here (a rank's phase record, the atomic write).

FAULT is one of:

- ``--rank RANK:PHASE`` (``:hang``): that rank of the probe (``comm.rank_state.Phases``) or of the synthetic pass
  (``synth.runner.Phases``) dies without a word (exit 3), or stops answering, as it enters PHASE;
- ``--after-writes N``: the process ends at once (exit 137, as kill -9 does: no cleanup, no finally) right after its
  N-th completed atomic file write (``iorw.atomic_path``).

:func:`write_launcher` writes an executable that stands for ``python`` with the fault installed; processes it starts
through ``multiprocessing`` (the synthetic pass's forked ranks) run under it too."""

from __future__ import annotations

import contextlib
import os
import runpy
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from verifylab.iorw import atomic_write_text

CRASHED = 137


def write_launcher(folder: Path, fault: list[str], python: str = sys.executable) -> Path:
    """An executable that runs ``python`` with ``fault`` installed (``["--rank", "1:init"]``, ``["--after-writes",
    "3"]``), for a test to put where the product starts Python."""
    launcher = folder / "python-with-a-fault"
    words = shlex.join([python, "-m", "verifylab.testing.faults", *fault])
    here = shlex.quote(str(launcher))
    atomic_write_text(launcher, f'#!/bin/sh\nVERIFYLAB_TESTING_LAUNCHER={here} exec {words} "$@"\n')
    launcher.chmod(0o755)
    return launcher


def _rank_fault(spec: str) -> None:
    """Patch every rank's phase record: entering the named phase, the named rank dies or hangs."""
    from verifylab.comm import rank_state
    from verifylab.synth import runner

    for phases in (rank_state.Phases, runner.Phases):
        entered = phases.enter

        def enter(self, phase: str, entered=entered) -> None:
            entered(self, phase)
            if spec == f"{self.rank}:{phase}":
                os._exit(3)  # a rank that dies without a word, as a crashed GPU process does
            if spec == f"{self.rank}:{phase}:hang":
                time.sleep(10**6)  # a rank that stops answering: its peers' and the parent's deadlines must end it

        phases.enter = enter  # type: ignore[method-assign]


def _write_fault(limit: int) -> None:
    """Patch the atomic write: the process ends right after its ``limit``-th completed file write."""
    from verifylab import iorw

    original, done = iorw.atomic_path, [0]

    @contextlib.contextmanager
    def atomic_path(target: Path) -> Iterator[Path]:
        with original(target) as tmp:
            yield tmp
        done[0] += 1
        if done[0] >= limit:
            os._exit(CRASHED)

    iorw.atomic_path = atomic_path


def _run_as_python(argv: list[str]) -> None:
    """``argv`` as ``python`` runs it: ``-m MODULE ARGS`` or ``-c CODE ARGS`` (interpreter options before them are
    dropped: a test's fault does not need them)."""
    while argv and argv[0] not in ("-m", "-c"):
        argv = argv[2:] if argv[0] in ("-X", "-W") else argv[1:]
    if len(argv) < 2:
        raise SystemExit("usage: python -m verifylab.testing.faults FAULT (-m MODULE | -c CODE) [ARGS...]")
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = ["-c", *argv[2:]]
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] not in ("--rank", "--after-writes"):
        raise SystemExit("usage: python -m verifylab.testing.faults (--rank R:PHASE[:hang] | --after-writes N) ...")
    if argv[0] == "--rank":
        _rank_fault(argv[1])
    else:
        _write_fault(int(argv[1]))
    launcher = os.environ.get("VERIFYLAB_TESTING_LAUNCHER")
    if launcher:  # processes started through multiprocessing run under the same fault
        import multiprocessing

        multiprocessing.set_executable(launcher)
    _run_as_python(argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
