"""Read one trace per rank in parallel processes: bytes-read progress from every worker, and the first
error ends the whole read at once (a bad byte in one rank never waits for the other ranks' gigabytes)."""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from typing import Any

Progress = Callable[[int, int], None]  # (bytes read so far, bytes in all files)
POLL_S = 0.2

_slots: Any = None  # per-process: the shared array of bytes read, one slot per job
_notify: Callable[[], None] | None = None


def _init(slots: Any, notify: Callable[[], None] | None = None) -> None:
    global _slots, _notify
    _slots, _notify = slots, notify


def bytes_read(slot: int) -> Callable[[int], None]:
    """The ``on_bytes`` callback a job passes to the reader: it records progress in its slot."""

    def record(n: int) -> None:
        if _slots is not None:
            _slots[slot] = n
            if _notify is not None:
                _notify()

    return record


def run_jobs(
    work: Callable[[tuple], dict], jobs: list[tuple], sizes: list[int], workers: int, progress: Progress | None
) -> list[dict]:
    """``work(job)`` for every job (its last element is its progress slot), in up to ``workers`` processes."""
    slots = multiprocessing.Array("q", len(jobs), lock=False)
    total = sum(sizes)
    report = (lambda: progress(sum(slots), total)) if progress else None
    if workers <= 1:
        _init(slots, report)
        try:
            return [work(job) for job in jobs]
        finally:
            _init(None)
    pool = ProcessPoolExecutor(workers, initializer=_init, initargs=(slots,))
    try:
        futures = [pool.submit(work, job) for job in jobs]
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=POLL_S, return_when=FIRST_EXCEPTION)
            if report:
                report()
            for future in done:
                error = future.exception()
                if error is not None:
                    _stop(pool)
                    raise error
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _stop(pool: ProcessPoolExecutor) -> None:
    """End the other workers now instead of letting them read to the end of their files."""
    for process in list(getattr(pool, "_processes", {}).values()):
        with contextlib.suppress(Exception):
            process.terminate()
