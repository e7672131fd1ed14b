"""Refuse a lock that was edited by hand before anything is installed from it (standard library only: it runs with
the system interpreter, before the virtual environment exists).

    python3 install/check_lock.py requirements/test.lock [...]    # check: exit 0, or 2 naming what is wrong
    python3 install/check_lock.py --write requirements/*.lock      # after `make lock`: record their digests

A lock holds one ``name==version`` per line (an environment marker allowed), comments and blank lines: no option
line (``--index-url``, ``--extra-index-url``, ``--find-links``, ``--trusted-host``, ``-e``, ``-r``...), no URL or
path requirement, so it cannot point the installer at another index or file. Its SHA-256 must be the one ``make
lock`` recorded beside it in ``SHA256SUMS``: a changed pin is refused until the lock is written again."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

SUMS = "SHA256SUMS"  # beside the locks
PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+(\s*;\s*[^#@]+)?$")


class LockError(Exception):
    """A lock that must not be installed from."""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def recorded(sums: Path) -> dict[str, str]:
    """File name -> digest, as ``make lock`` wrote them (``sha256sum``'s format)."""
    if not sums.is_file():
        raise LockError(f"{sums} is missing: run `make lock` to write the locks and their digests")
    out = {}
    for n, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), start=1):
        fields = line.split()
        if len(fields) != 2 or not re.fullmatch(r"[0-9a-f]{64}", fields[0]):
            raise LockError(f"{sums}:{n}: not '<sha256>  <file>'")
        out[Path(fields[1]).name] = fields[0]
    return out


def check_lines(path: Path) -> None:
    """Every line a comment, blank, or one pinned requirement."""
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            raise LockError(f"{path}:{n}: an option line ({line.split()[0]!r}) — a lock names packages, never an index")
        if not PIN.match(line):
            raise LockError(f"{path}:{n}: {line[:60]!r} is not one 'name==version' (no URL, path or range)")


def check(path: Path) -> None:
    """Refuse ``path`` unless its lines are pins and its digest is the one recorded beside it."""
    if not path.is_file():
        raise LockError(f"{path}: no such lock")
    check_lines(path)
    sums = path.parent / SUMS
    want = recorded(sums).get(path.name)
    if want is None:
        raise LockError(f"{path.name} has no digest in {sums}: run `make lock`")
    if digest(path) != want:
        raise LockError(
            f"{path}: its SHA-256 is not the one `make lock` recorded in {sums.name} — the lock was edited by "
            "hand; run `make lock` to write it again"
        )


def write(paths: list[Path]) -> None:
    """Record each lock's digest beside it (after checking its lines), replacing the file whole."""
    if len({p.parent.resolve() for p in paths}) != 1:
        raise LockError("the locks of one --write must lie in one folder")
    for path in paths:
        check_lines(path)
    sums = paths[0].parent / SUMS
    text = "".join(f"{digest(p)}  {p.name}\n" for p in sorted(paths, key=lambda p: p.name))
    tmp = sums.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(sums)


def main(argv: list[str]) -> int:
    writing = argv[:1] == ["--write"]
    paths = [Path(a) for a in (argv[1:] if writing else argv)]
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        if writing:
            write(paths)
        else:
            for path in paths:
                check(path)
    except (LockError, OSError, UnicodeDecodeError) as exc:
        print(f"check_lock: {exc}; nothing was installed", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
