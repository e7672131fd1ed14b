"""Which files are traces, and which rank each one is."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from verifylab.errors import TraceError
from verifylab.intake import OutsideFileError, checked_file

TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".trace.json.gz")
SIDECAR_SUFFIXES = (".times.json",)  # JSON that is not a trace (other sidecars are dotfiles or not *.json)


def is_trace_file(path: Path) -> bool:
    """A profiler trace by its name: ``*.json`` / ``*.json.gz``, not a dotfile (sidecars, editors' files) and
    not a sidecar such as ``*.times.json``."""
    name = path.name
    return (
        path.is_file()
        and not name.startswith(".")
        and name.endswith(TRACE_SUFFIXES)
        and not name.endswith(SIDECAR_SUFFIXES)
    )


def expand_paths(paths: Sequence[Path | str]) -> list[Path]:
    """Files as given; folders expanded to the trace files they hold (sorted; dotfiles and sidecars skipped)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if is_trace_file(f))
            if not found:
                raise TraceError(f"{p}: folder holds no trace files (*.json, *.json.gz; dotfiles and sidecars skipped)")
            files.extend(found)
        elif p.exists():
            try:
                files.append(checked_file(p, "trace"))  # a FIFO or a device would hang or never end
            except OutsideFileError as exc:
                raise TraceError(str(exc)) from None
        else:
            raise TraceError(f"{p}: no such file or folder")
    return files


def assign_ranks(files: list[Path]) -> list[tuple[Path, int]]:
    """Each file with its rank; refuses two files that claim the same rank (two captures in one folder)."""
    claimed: dict[int, Path] = {}
    out = []
    for i, f in enumerate(files):
        rank = rank_of(f, i)
        if rank in claimed:
            raise TraceError(
                f"{claimed[rank]} and {f} both claim rank {rank}: summarize one capture at a time "
                "(pass the files of one capture, or move the other out of the folder)"
            )
        claimed[rank] = f
        out.append((f, rank))
    return out


def rank_of(path: Path, fallback: int) -> int:
    """Rank from an SGLang-style (``-TP-3``) or ``rank3`` file name, else the file's position."""
    match = re.search(r"(?:-TP-|rank[_-]?|-rank-)(\d+)", path.name, re.I)
    return int(match.group(1)) if match else fallback
