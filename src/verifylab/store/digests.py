"""Digests of what a result is made from: the package's code and a data folder (every file, links followed),
each a sha256 the book's build and the interactive commands' cache key on."""

from __future__ import annotations

import hashlib
import os
import stat
import sysconfig
from pathlib import Path

import verifylab
from verifylab.errors import BookBuildError
from verifylab.iorw import is_temp_file

LOCK_FILE = ".verifylab.lock"  # the run store's lock (verifylab.store.runs)
MEASURING_LOCK_FILE = ".verifylab.measuring"
NOT_DATA_FILES = frozenset({LOCK_FILE, MEASURING_LOCK_FILE})  # taken and released by writers: never data


def code_digest(package: Path | None = None) -> str:
    """sha256 over every Python file of the verifylab package (relative path + bytes, sorted)."""
    root = package or Path(verifylab.__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def installed_stamp() -> str:
    """When this Python's installed packages last changed (their folder's mtime: a package installed or removed),
    or "" where there is no such folder."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    return str(purelib.stat().st_mtime_ns) if purelib.is_dir() else ""


def data_files(data_dir: Path) -> list[Path]:
    """Every file the book may read under ``data_dir``, following links as the readers do (a linked ``runs/`` or
    ``gates/`` folder is data too; a link back up is walked once); anything that is not a regular file (a FIFO,
    a socket, a device) is refused before the build reads a byte, naming it."""
    files, seen = [], set()
    for folder, dirs, names in os.walk(data_dir, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # a link back to a folder already walked
            dirs[:] = []
            continue
        seen.add(real)
        for name in names:
            path = Path(folder) / name
            mode = path.stat().st_mode if path.exists() else 0
            if not stat.S_ISREG(mode):
                raise BookBuildError(
                    f"{path}: not a regular file (a FIFO, socket, device or broken link) under the data folder: "
                    "remove it; the book reads only files"
                )
            files.append(path)
    return sorted(files)


def data_digest(data_dir: Path) -> str:
    """sha256 over every file under ``data_dir`` (relative path + bytes, links followed: :func:`data_files`), in
    sorted order, each file read in chunks (a GB trace costs no GB of memory); run-store lock files and a killed
    write's temporary files are not data."""

    h = hashlib.sha256()
    for path in data_files(Path(data_dir)):
        if path.name in NOT_DATA_FILES or is_temp_file(path):
            continue
        h.update(path.relative_to(data_dir).as_posix().encode() + b"\0")
        with open(path, "rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()
