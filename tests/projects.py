"""A copy of the project for tests that build the book or run the pipeline (test helper)."""

from __future__ import annotations

import shutil
from pathlib import Path


def project_copy(repo_root: Path, target: Path) -> Path:
    """The parts of the project a book build reads, copied into ``target`` (builds never touch the checkout)."""
    for name in ("notebooks", "data", "_config.yml", "_toc.yml"):
        src = repo_root / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, target / name)
    shutil.copytree(repo_root / "book", target / "book", ignore=shutil.ignore_patterns("_generated"))
    return target
