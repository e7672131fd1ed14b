"""Ctrl-C during a run of chapters: the first stops the run after the cell in progress (no chapter starts after
it), the second interrupts the running cells too (their ``with`` blocks stop the servers they started), the third
is Python's own. The kernels run in sessions of their own and never see the terminal's Ctrl-C: they hear it from
here. The caller then says what completed and how to resume."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from verifylab.errors import VerifylabError


class ChapterInterrupted(VerifylabError):
    """Raised after a cell completes once a stop was asked for: the chapter ends there."""


class RunStop:
    """What Ctrl-C asked for, and the kernels it must reach: each chapter runs in a thread of its own, which
    starts its kernel and runs its cells; only a kernel whose chapter has a cell running is interrupted (a kernel
    starting, between cells or shutting down would raise KeyboardInterrupt in a message handler, and print
    tornado's traceback of it)."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.presses = 0
        self._kernels: dict[Any, int] = {}  # kernel manager -> the thread of its chapter
        self._in_cell: set[int] = set()  # the threads whose chapter has a cell running
        self._lock = threading.Lock()

    def add_kernel(self, manager: Any) -> None:
        """A chapter starts its kernel in this thread: no cell of it runs yet (whatever this thread ran before)."""
        with self._lock:
            self._kernels[manager] = threading.get_ident()
            self._in_cell.discard(threading.get_ident())

    def drop_kernel(self, manager: Any) -> None:
        with self._lock:
            self._kernels.pop(manager, None)

    def before_cell(self) -> None:
        """Called when this thread's chapter starts a cell: a second Ctrl-C interrupts its kernel now."""
        with self._lock:
            self._in_cell.add(threading.get_ident())

    def after_cell(self) -> None:
        """Called when a cell completes: end the chapter here when a stop was asked for."""
        with self._lock:
            self._in_cell.discard(threading.get_ident())
        if self.requested.is_set():
            raise ChapterInterrupted("interrupted (Ctrl-C): stopped after the cell in progress")

    def running_kernels(self) -> list[Any]:
        """The kernels whose chapter has a cell running."""
        with self._lock:
            return [manager for manager, thread in self._kernels.items() if thread in self._in_cell]

    def press(self) -> None:
        """One Ctrl-C: stop after the cell; the second also interrupts the running cells."""
        self.presses += 1
        self.requested.set()
        _quiet_kernel_channels()  # a stopping kernel's message loop logs its cut channels as tracebacks: not news
        if self.presses == 1:
            _say("\nCtrl-C: stopping after the cell in progress (Ctrl-C again interrupts it)\n")
            return
        _say("\nCtrl-C again: interrupting the running cells (their servers are stopped)\n")
        for manager in self.running_kernels():
            pid = getattr(getattr(manager, "provisioner", None), "pid", None)
            if pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGINT)


QUIETED = ("tornado.general", "tornado.application")  # where a kernel's zmq callbacks log their errors


def _quiet_kernel_channels() -> None:
    """While a run stops, the kernels' zmq callbacks (cut mid-message by the interrupt) log nothing: the user asked
    for the stop, and a traceback from a channel would read as a failure."""
    for name in QUIETED:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


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
    levels = {name: logging.getLogger(name).level for name in QUIETED}
    try:
        yield CURRENT
    finally:
        signal.signal(signal.SIGINT, previous)
        for name, level in levels.items():  # a later run in this process hears its kernels again
            logging.getLogger(name).setLevel(level)
