"""An installed SGLang/FlashInfer tree is whole before any gate is judged: every ``*.py`` under its packages is a
regular file inside the root (a FIFO, a folder or a link out of the root named like a source is refused), and
every file the audited gate matrix lists for the installed version is there. Otherwise a missing gate would read
as 'no closed gate' and a patch could land outside ``--root``."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path

from verifylab.csv_cells import restore_cell
from verifylab.errors import GateError
from verifylab.intake import OutsideFileError, checked_file

KnownFiles = Mapping[tuple[str, str], frozenset[str]]  # (package, version) -> files the matrix found gates in


def known_gate_files(matrix_csv: Path) -> KnownFiles:
    """The files each audited (package, version) holds findings in, from a gate matrix CSV (``gates matrix``)."""
    try:
        with open(checked_file(matrix_csv, "gate matrix"), encoding="utf-8", newline="") as handle:
            rows = [{k: str(restore_cell(v)) for k, v in row.items()} for row in csv.DictReader(handle)]
    except OutsideFileError as exc:
        raise GateError(str(exc)) from None
    known: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        if row.get("package") and row.get("version") and row.get("file"):
            known.setdefault((row["package"], row["version"]), set()).add(row["file"])
    return {key: frozenset(files) for key, files in known.items()}


def check_tree(root: Path, packages: Iterable[str], versions: Mapping[str, str | None], known: KnownFiles) -> None:
    """:class:`GateError` naming the first entry that makes ``root`` not a whole tree (see the module's text)."""
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            try:
                checked_file(path, "Python source", root=root)
            except OutsideFileError as exc:
                raise GateError(f"{exc}; the tree is not whole: nothing was changed") from None
        version = versions.get(package)
        for rel in sorted(known.get((package, version or ""), ())):
            try:
                checked_file(root / rel, "Python source", root=root)
            except OutsideFileError as exc:
                raise GateError(
                    f"{exc}: the audited {package} {version} holds gates there, so this tree is broken "
                    f"(reinstall {package}); nothing was changed"
                ) from None
