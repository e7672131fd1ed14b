"""A copy of the project for tests that build the book or run the pipeline (test helper)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml


def project_copy(repo_root: Path, target: Path, runs: bool = True) -> Path:
    """The parts of the project a book build reads, copied into ``target`` (builds never touch the checkout).
    ``runs=False``: a data folder with no run yet (a box's own, before it measured): its chapters replay nothing
    stored, so a live chapter costs what its measurement costs."""
    for name in ("notebooks", "data", "_config.yml"):
        src = repo_root / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, target / name)
    if not runs:
        shutil.rmtree(target / "data" / "runs")
        (target / "data" / "runs").mkdir()
    shutil.copytree(repo_root / "book", target / "book", ignore=shutil.ignore_patterns("_generated"))
    return target


class _NoAliasDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def write_params(path: Path, data: dict) -> Path:
    """``data`` written as a parameters file verifylab accepts: a value used twice is written out twice (PyYAML's
    default would write an anchor and an alias, which verifylab refuses)."""
    path.write_text(yaml.dump(data, Dumper=_NoAliasDumper), encoding="utf-8")
    return path
