"""All file writes go through here: temp file in the same folder, fsync, then an atomic rename (and an fsync of
the folder). The target keeps its permission bits (a new file gets the umask's); a symlinked target is written
through, so the link stays a link. A file's sha256 (what the gates record before and after a patch) is read
here too."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from verifylab.errors import StorageError

_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _new_file_mode() -> int:
    """The mode ``open()`` would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot open a folder for fsync
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it over ``target``, else delete it."""
    target = Path(target)
    if target.is_symlink():
        target = target.resolve()  # replace what the link points to, not the link
    if target.is_dir():  # os.replace would fail only after the whole file was written beside it
        raise StorageError(errno.EISDIR, f"cannot write {target}: a folder is there, not a file; nothing was replaced")
    if target.exists() and not target.is_file():  # a device, FIFO or socket (/dev/null): the rename would replace it
        raise StorageError(
            errno.EINVAL, f"cannot write {target}: not a regular file (a device, FIFO or socket); nothing was replaced"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else _new_file_mode()
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _storage_error(target, exc) from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)  # mkstemp makes 0600: other users must still read what they could read
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno in _NO_ROOM or exc.errno in (errno.EROFS, errno.EACCES):
            raise _storage_error(target, exc) from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _storage_error(target: Path, exc: OSError) -> StorageError:
    """One line: which file, why, and (disk full) how much room is left there."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    room = ""
    if exc.errno in _NO_ROOM:
        with contextlib.suppress(OSError):
            room = f"; {shutil.disk_usage(target.parent).free / 2**20:.0f} MiB free there"
    return StorageError(exc.errno, f"cannot write {target}: {reason}{room}; nothing was replaced")


def is_temp_file(path: Path) -> bool:
    """A temporary file of an atomic write (``.<name>.<random>.tmp``): never data, left only by a killed write."""
    return path.name.startswith(".") and path.name.endswith(".tmp")


def stray_temps(target: Path) -> list[Path]:
    """Temporary files a killed write of ``target`` left beside it (``.<name>.<random>.tmp``)."""
    target = Path(target)
    return sorted(target.parent.glob(f".{target.name}.*.tmp")) if target.parent.is_dir() else []


def remove_stray_temps(target: Path) -> None:
    """Delete what killed writes of ``target`` left beside it (call it holding the lock that guards ``target``)."""
    for tmp in stray_temps(target):
        tmp.unlink(missing_ok=True)


def atomic_write_bytes(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(target: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``target`` atomically."""
    atomic_write_bytes(target, text.encode("utf-8"))


def atomic_write_json(target: Path, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON atomically (stable bytes for stable inputs)."""
    atomic_write_text(target, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def atomic_write_with(target: Path, writer: Callable[[Path], None]) -> None:
    """Let ``writer`` fill a temporary path (e.g. a Parquet writer), then rename it to ``target``."""
    with atomic_path(target) as tmp:
        writer(tmp)


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_of(path: Path) -> str:
    """The hex sha256 of the file at ``path``, read in pieces (never whole into memory)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


EXISTS_EVENT = "verifylab.exists"  # raised (PEP 578) by every existence check a reader makes of the data folder


def file_exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a file, announced as an audit event first, so a build that records what a chapter read
    (``publish.chapter_reads``) records the question too: a manifest that arrives later changes the chapter's inputs."""
    import sys

    sys.audit(EXISTS_EVENT, os.fspath(path))
    return os.path.isfile(path)
