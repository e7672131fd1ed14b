"""All file writes go through here: temp file in the same folder, fsync, then an atomic rename."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it over ``target``, else delete it."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
