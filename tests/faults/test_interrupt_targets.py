"""A second Ctrl-C interrupts only the kernels whose chapter has a cell running. A kernel starting, between cells
or shutting down is left alone: SIGINT in one of its message handlers raised KeyboardInterrupt there, and tornado
printed the traceback into the run's output (seen under load in `verifylab book --force` with two presses)."""

from __future__ import annotations

import signal
import threading
import time
from types import SimpleNamespace

import pytest

from verifylab.publish import interrupt


class _Kernel:
    """What a kernel manager offers the interrupt: its provisioner's process id."""

    def __init__(self, pid: int) -> None:
        self.provisioner = SimpleNamespace(pid=pid)


def test_the_second_press_signals_the_kernel_in_a_cell_and_not_the_idle_one(monkeypatch):
    signalled: list[tuple[int, int]] = []
    monkeypatch.setattr(interrupt.os, "kill", lambda pid, sig: signalled.append((pid, sig)))
    monkeypatch.setattr(interrupt, "_say", lambda text: None)
    stop = interrupt.RunStop()
    busy, idle = _Kernel(101), _Kernel(202)
    in_cell = threading.Event()
    release = threading.Event()

    def chapter(kernel: _Kernel, runs_a_cell: bool) -> None:
        stop.add_kernel(kernel)  # as a chapter's thread starts its kernel
        if runs_a_cell:
            stop.before_cell()
            in_cell.set()
        release.wait(10)

    threads = [threading.Thread(target=chapter, args=args) for args in ((busy, True), (idle, False))]
    for thread in threads:
        thread.start()
    assert in_cell.wait(10)
    time.sleep(0.1)  # the idle chapter's thread has registered its kernel
    stop.press()
    assert signalled == [] and stop.requested.is_set()  # the first press only asks for a stop after the cell
    stop.press()
    release.set()
    for thread in threads:
        thread.join(10)
    assert signalled == [(101, signal.SIGINT)]


def test_a_cell_that_completed_takes_its_kernel_out_of_reach():
    stop = interrupt.RunStop()
    kernel = _Kernel(303)
    stop.add_kernel(kernel)
    stop.before_cell()
    assert stop.running_kernels() == [kernel]
    stop.after_cell()
    assert stop.running_kernels() == []
    stop.requested.set()
    stop.before_cell()
    with pytest.raises(interrupt.ChapterInterrupted):
        stop.after_cell()
    assert stop.running_kernels() == []
    stop.before_cell()  # a chapter that died in a cell (its kernel lost): the thread's next chapter starts clean
    stop.add_kernel(_Kernel(404))
    assert stop.running_kernels() == []


@pytest.mark.slow  # starts a kernel
def test_a_chapters_kernel_is_in_reach_exactly_while_its_cell_runs(tmp_path):
    from verifylab.publish.build import execute_chapter

    marker = tmp_path / "cell-started"
    source = tmp_path / "tiny.py"
    source.write_text(
        f"# %%\nimport pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(3)\n\n# %%\n1 + 1\n",
        encoding="utf-8",
    )
    seen: list[int] = []

    def watch() -> None:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.append(len(interrupt.CURRENT.running_kernels()))

    watcher = threading.Thread(target=watch)
    watcher.start()
    result = execute_chapter(source, tmp_path / "out.ipynb", {}, tmp_path)
    watcher.join(60)
    assert result.ok, result.error
    assert seen == [1]  # the kernel running the sleeping cell
    assert interrupt.CURRENT.running_kernels() == []  # its chapter ended: nothing left to interrupt
