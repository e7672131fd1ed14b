"""The processes of this machine as tests look for leftovers (test helper, read from /proc)."""

from __future__ import annotations

from pathlib import Path


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every living process; zombies (already dead) are left out."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if fields[0] != "Z":
            found[int(stat.parent.name)] = (int(fields[1]), cmdline)
    return found


def descendants(pid: int) -> set[int]:
    """Every living process below ``pid``."""
    parents = {child: parent for child, (parent, _) in processes().items()}
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found
