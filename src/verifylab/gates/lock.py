"""One writer per installed tree: ``gates apply`` and ``gates revert`` hold an exclusive lock on the package
folder itself (``flock`` on the directory: no lock file is left in site-packages), so a second one started
meanwhile is refused in one line instead of interleaving its writes with the first's."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from verifylab.errors import GateError

_held: dict[str, int] = {}  # trees this process holds (apply recovers through revert: the same lock, not a second)


@contextmanager
def tree_lock(root: Path, doing: str) -> Iterator[None]:
    """Hold ``root``'s writer lock for ``doing`` (apply, revert); refuse at once when another process holds it."""
    key = str(Path(root).resolve())
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    try:
        fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise GateError(f"{root}: cannot open the package folder ({exc.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise GateError(
            f"{root}: another verifylab process is applying or reverting its gates now; "
            f"run this {doing} again when it has ended (nothing was changed)"
        ) from None
    _held[key] = 1
    try:
        yield
    finally:
        del _held[key]
        os.close(fd)  # closing the folder releases the lock
