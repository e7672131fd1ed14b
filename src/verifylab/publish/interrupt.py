"""Ctrl-C during a run of chapters: the first stops the run after the cell in progress (no chapter starts after
it), the second interrupts the running cells too (their ``with`` blocks stop the servers they started), the third
is Python's own. The kernels run in sessions of their own and never see the terminal's Ctrl-C: they hear it from
here. The caller then says what completed and how to resume."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from verifylab.errors import VerifylabError


class ChapterInterrupted(VerifylabError):
    """Raised after a cell completes once a stop was asked for: the chapter ends there."""


class RunStop:
    """What Ctrl-C asked for, and the kernels it must reach."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.presses = 0
        self._kernels: set[Any] = set()
        self._lock = threading.Lock()

    def add_kernel(self, manager: Any) -> None:
        with self._lock:
            self._kernels.add(manager)

    def drop_kernel(self, manager: Any) -> None:
        with self._lock:
            self._kernels.discard(manager)

    def after_cell(self) -> None:
        """Called when a cell completes: end the chapter here when a stop was asked for."""
        if self.requested.is_set():
            raise ChapterInterrupted("interrupted (Ctrl-C): stopped after the cell in progress")

    def press(self) -> None:
        """One Ctrl-C: stop after the cell; the second also interrupts the running cells."""
        self.presses += 1
        self.requested.set()
        if self.presses == 1:
            _say("\nCtrl-C: stopping after the cell in progress (Ctrl-C again interrupts it)\n")
            return
        _say("\nCtrl-C again: interrupting the running cells (their servers are stopped)\n")
        with self._lock:
            kernels = list(self._kernels)
        for manager in kernels:
            pid = getattr(getattr(manager, "provisioner", None), "pid", None)
            if pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGINT)


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, text.encode())


CURRENT = RunStop()  # the run this process is executing (one at a time: `verifylab run` is one command)


@contextlib.contextmanager
def stop_on_ctrl_c() -> Iterator[RunStop]:
    """Within the block, Ctrl-C goes to :data:`CURRENT` (a fresh one); the third press is Python's own."""
    global CURRENT
    CURRENT = RunStop()
    if threading.current_thread() is not threading.main_thread():
        yield CURRENT  # a signal handler can only be set in the main thread
        return

    def handler(signum: int, frame: object) -> None:
        if CURRENT.presses >= 2:
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        CURRENT.press()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield CURRENT
    finally:
        signal.signal(signal.SIGINT, previous)
