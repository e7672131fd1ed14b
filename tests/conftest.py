"""Shared fixtures: the project root, a temporary run store, and one built book per session."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT.parent / "shared" / "seeds"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    """A copy of the shipped data folder (reference + runs) that tests may change."""
    target = tmp_path / "data"
    shutil.copytree(ROOT / "data", target)
    return target


@pytest.fixture(scope="session")
def built_book() -> Path:
    """Build the book once (replay mode) and return ``_build/html``; VERIFYLAB_BOOK_HTML reuses a build."""
    reuse = os.environ.get("VERIFYLAB_BOOK_HTML")
    if reuse and (Path(reuse) / "index.html").is_file():
        return Path(reuse)
    from verifylab.book import build_book

    result = build_book(ROOT)
    assert result.index_html is not None
    return result.index_html.parent
