"""The one boundary of verifylab's on-disk caches (the interactive commands' answers and derived values).

A cache folder is used only if the caller owns it and nobody else can write it, nor any folder above it unless
that folder has the sticky bit (``/tmp``); the path is walked one folder at a time through directory descriptors,
following no link. An entry is opened without following links, must be a regular file of the caller's, and is
authenticated (HMAC-SHA256 under a key in the folder that only the caller can read) before a byte of it is used:
a planted file, a link or an entry renamed to another name reads as absent. Entries are written to a private
temporary file and renamed into place through the folder's descriptor, so a planted link is replaced, never written
through. Entry names are plain names inside their folder (no separator, no ``..``)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from verifylab.errors import CacheFolderRefused

MAGIC = b"VLC1"  # an entry: MAGIC, the 32-byte tag, then the payload
KEY_NAME = "key"
KEY_BYTES = 32
MAX_ENTRY_BYTES = 256 << 20  # an entry larger than this is not read (the derived values are a few MB)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def plain_name(name: str) -> str:
    """``name`` if it is a plain file name inside a folder (no separator, not ``.``/``..``, no NUL), else raises."""
    if not name or name in (".", "..") or "/" in name or "\0" in name or (os.altsep and os.altsep in name):
        raise CacheFolderRefused(f"cache entry name {name!r}: not a plain file name inside its folder")
    return name


def _refuse(path: Path, why: str) -> CacheFolderRefused:
    return CacheFolderRefused(
        f"cache folder {path} not used: {why}; answers are computed afresh "
        f"(set VERIFYLAB_CACHE to a folder of your own, or to off)"
    )


def _check_above(path: Path, st: os.stat_result, uid: int) -> None:
    """A folder above the cache: owned by the caller or root, and writable by others only with the sticky bit."""
    if st.st_uid not in (uid, 0):
        raise _refuse(path, f"{path} is owned by another user (uid {st.st_uid})")
    if st.st_mode & _OTHERS_WRITE and not st.st_mode & stat.S_ISVTX:
        raise _refuse(path, f"{path} is writable by others without the sticky bit (mode {stat.filemode(st.st_mode)})")


def _check_own(path: Path, st: os.stat_result, uid: int) -> None:
    """The cache folder (and its sub-folders): the caller's, writable by nobody else."""
    if st.st_uid != uid:
        raise _refuse(path, f"{path} is owned by another user (uid {st.st_uid})")
    if st.st_mode & _OTHERS_WRITE:
        raise _refuse(path, f"{path} is writable by others (mode {stat.filemode(st.st_mode)})")


def _open_below(fd: int, part: str, create: bool, where: Path) -> int:
    """The folder ``part`` inside the folder ``fd``, opened without following a link (made 0700 if ``create``)."""
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
        with contextlib.suppress(FileExistsError):  # another process made it first: checked below all the same
            os.mkdir(part, 0o700, dir_fd=fd)
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse(where, f"{where} is a link or not a folder") from None
        raise


@dataclass
class CacheFolder:
    """A checked cache folder, held open by its descriptor; its entries read and written through it."""

    path: Path
    fd: int
    key: bytes

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def _tag(self, name: str, payload: bytes) -> bytes:
        return hmac.new(self.key, name.encode() + b"\0" + payload, hashlib.sha256).digest()

    def read(self, name: str) -> bytes | None:
        """The payload of entry ``name``, or None: absent, a link, not the caller's regular file, too large, or not
        written by this cache (its tag does not match)."""
        try:
            fd = os.open(plain_name(name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=self.fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & _OTHERS_WRITE:
                return None
            if st.st_size > MAX_ENTRY_BYTES:
                return None
            with os.fdopen(os.dup(fd), "rb") as fh:
                data = fh.read(MAX_ENTRY_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        head = len(MAGIC) + hashlib.sha256().digest_size
        if len(data) < head or not data.startswith(MAGIC):
            return None
        tag, payload = data[len(MAGIC) : head], data[head:]
        return payload if hmac.compare_digest(tag, self._tag(name, payload)) else None

    def write(self, name: str, payload: bytes) -> None:
        """Write entry ``name`` (0600, whole, then renamed into place through the folder: a link there is replaced)."""
        plain_name(name)
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self.fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(MAGIC + self._tag(name, payload) + payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise

    def entries(self, suffix: str) -> list[tuple[str, int]]:
        """The names ending in ``suffix`` with their modification times (ns), newest first; links left out."""
        found = []
        for name in os.listdir(self.fd):
            if not name.endswith(suffix) or name.startswith("."):
                continue
            with contextlib.suppress(OSError):
                st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    found.append((name, st.st_mtime_ns))
        return sorted(found, key=lambda item: item[1], reverse=True)

    def remove(self, name: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(plain_name(name), dir_fd=self.fd)


def _key(fd: int, where: Path) -> bytes:
    """The folder's key: its ``key`` file where that is the caller's private regular file of the right size, else a
    new one (renamed over whatever stood there: a planted link or file is replaced, and every entry it tagged is
    ignored from then on)."""
    with contextlib.suppress(OSError):
        kfd = os.open(KEY_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=fd)
        try:
            st = os.fstat(kfd)
            if (
                stat.S_ISREG(st.st_mode)
                and st.st_uid == os.geteuid()
                and not st.st_mode & 0o077
                and st.st_size == KEY_BYTES
            ):
                key = os.read(kfd, KEY_BYTES + 1)
                if len(key) == KEY_BYTES:
                    return key
        finally:
            os.close(kfd)
    key = secrets.token_bytes(KEY_BYTES)
    tmp = f".{KEY_NAME}.{secrets.token_hex(8)}.tmp"
    kfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
    try:
        os.write(kfd, key)
        os.fsync(kfd)
    finally:
        os.close(kfd)
    os.replace(tmp, KEY_NAME, src_dir_fd=fd, dst_dir_fd=fd)
    return key


def open_cache_folder(path: Path, sub: str | None = None, create: bool = True) -> CacheFolder:
    """The cache folder ``path`` (and its sub-folder ``sub``), checked from ``/`` down, or
    :class:`CacheFolderRefused` naming the folder and why. Links in the path given are resolved once, then the walk
    follows none (a folder swapped for a link while it walks is refused)."""
    uid = os.geteuid()
    real = Path(os.path.realpath(os.path.abspath(path)))
    fd = os.open("/", _DIR_FLAGS)
    try:
        walked = Path("/")
        parts = real.parts[1:]
        if not parts:
            raise _refuse(real, "/ is not a cache folder")
        _check_above(walked, os.fstat(fd), uid)
        for i, part in enumerate(parts):
            walked = walked / part
            below = _open_below(fd, part, create, walked)
            os.close(fd)
            fd = below
            if i < len(parts) - 1:
                _check_above(walked, os.fstat(fd), uid)
            else:
                _check_own(walked, os.fstat(fd), uid)
        key = _key(fd, real)
        if sub is not None:
            below = _open_below(fd, plain_name(sub), create, real / sub)
            os.close(fd)
            fd = below
            _check_own(real / sub, os.fstat(fd), uid)
            real = real / sub
    except BaseException:
        os.close(fd)
        raise
    return CacheFolder(real, fd, key)


@contextlib.contextmanager
def cache_folder_open(path: Path, sub: str | None = None) -> Iterator[CacheFolder]:
    """:func:`open_cache_folder`, closed on leaving."""
    folder = open_cache_folder(path, sub)
    try:
        yield folder
    finally:
        folder.close()
