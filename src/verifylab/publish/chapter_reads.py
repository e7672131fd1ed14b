"""What a chapter read of the data folder, recorded as it executes, so that the next build re-executes it only when
that changed (like a compiler's dependency file): every file its kernel opened and every folder it listed under the
data folder, and every existence check the store made (``iorw.file_exists``: a manifest asked for and absent is a
read too), seen through Python's audit hooks (PEP 578) — whichever reader opened them.

The kernel calls :func:`track` at start-up; the build reads the log with :func:`read_log` and keeps it in the
executed notebook. :func:`reads_digest` digests, for those reads: each file's bytes, each listed folder's names,
and the names of every file outside the run store (a gate matrix or reference table that appears or goes counts for
every chapter, even one that only asked whether it exists)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifylab.iorw import EXISTS_EVENT, is_temp_file
from verifylab.store.digests import data_files
from verifylab.store.runs import NOT_DATA_FILES

LISTING_EVENTS = ("os.listdir", "os.scandir")
RUN_STORE = "runs"


def track(data_dir: str, log: str) -> None:
    """Append to ``log`` (one JSON line each, once) every file this process opens and every folder it lists under
    ``data_dir``. Installed for the life of the process: a kernel's."""
    root = os.path.abspath(data_dir)
    prefix = root + os.sep
    seen: set[tuple[str, str]] = set()
    out = open(log, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 — kept open for the process's life

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event != "open" and event != EXISTS_EVENT and event not in LISTING_EVENTS:
            return
        try:
            path = args[0] if args else None
            if path is None or isinstance(path, int):
                return  # a file descriptor: opened before, by path
            full = os.path.abspath(os.fsdecode(os.fspath(path)))
            if full != root and not full.startswith(prefix):
                return
            key = ("dir" if event in LISTING_EVENTS else "file", os.path.relpath(full, root))
            if key not in seen:
                seen.add(key)
                out.write(json.dumps(key) + "\n")
        except Exception:  # an audit hook that raises would fail the reader's own open
            return

    sys.addaudithook(hook)


@dataclass(frozen=True)
class Reads:
    """Paths relative to the data folder: files opened, folders listed."""

    files: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()

    def as_json(self) -> dict[str, list[str]]:
        return {"files": list(self.files), "dirs": list(self.dirs)}

    @classmethod
    def of_json(cls, data: Any) -> Reads | None:
        """From an executed notebook's record (None: no record, or not one)."""
        if not isinstance(data, dict):
            return None
        files, dirs = data.get("files"), data.get("dirs")
        if not (isinstance(files, list) and isinstance(dirs, list)):
            return None
        if not all(isinstance(p, str) for p in (*files, *dirs)):
            return None
        return cls(tuple(files), tuple(dirs))


def read_log(log: Path) -> Reads | None:
    """The reads a kernel logged (an empty log: none); None where there is no log: :func:`track` creates it when it
    is installed, so the kernel never tracked, and its copy must not be trusted as one that read nothing."""
    files: set[str] = set()
    dirs: set[str] = set()
    if not log.is_file():
        return None
    for line in log.read_text(encoding="utf-8").splitlines():
        kind, path = json.loads(line)
        (files if kind == "file" else dirs).add(path)
    return Reads(tuple(sorted(files)), tuple(sorted(dirs)))


def _listing(folder: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(folder) if n not in NOT_DATA_FILES and not is_temp_file(folder / n))
    except OSError:
        return ["<absent>"]


@dataclass(frozen=True)
class DataSnapshot:
    """The data folder as it was when a chapter began: each file's sha256 and each folder's names, by path relative to
    the folder. A chapter's reads are digested from it, so a run that lands while the chapter executes is not recorded
    as read (the next build sees it and executes the chapter again)."""

    files: dict[str, bytes]
    dirs: dict[str, list[str]]


def data_snapshot(data_dir: Path) -> DataSnapshot:
    """The data folder's files and listings now (taken right before a chapter executes)."""
    files, dirs = {}, {}
    for path in data_files(data_dir):
        rel = path.relative_to(data_dir).as_posix()
        with open(path, "rb") as fh:
            files[rel] = hashlib.file_digest(fh, "sha256").digest()
    for folder, _, _ in os.walk(data_dir, followlinks=True):
        rel = Path(folder).relative_to(data_dir).as_posix()
        dirs[rel] = _listing(Path(folder))
    return DataSnapshot(files, dirs)


def reads_digest(data_dir: Path, reads: Reads, data_names: list[str], snapshot: DataSnapshot | None = None) -> str:
    """sha256 over what ``reads`` name — as they are now, or as ``snapshot`` holds them (what the chapter could have
    read when it began): each file's bytes (absent: said so), each folder's names, and ``data_names`` outside the run
    store (the data folder's files, relative, from :func:`verifylab.publish.edition.data_files`)."""
    h = hashlib.sha256()
    for rel in reads.files:
        if Path(rel).name in NOT_DATA_FILES:
            continue
        path = data_dir / rel
        h.update(b"file\0" + rel.encode() + b"\0")
        if snapshot is not None:
            h.update(snapshot.files.get(Path(rel).as_posix(), b"<absent>"))
        elif path.is_file():
            with open(path, "rb") as fh:
                h.update(hashlib.file_digest(fh, "sha256").digest())
        else:
            h.update(b"<absent>")
    for rel in reads.dirs:
        listing = snapshot.dirs.get(Path(rel).as_posix(), ["<absent>"]) if snapshot else _listing(data_dir / rel)
        h.update(b"dir\0" + rel.encode() + b"\0" + "\0".join(listing).encode())
    outside = [n for n in data_names if not n.startswith(RUN_STORE + "/")]
    h.update(b"names\0" + "\0".join(sorted(outside)).encode())
    return h.hexdigest()
