"""Shared fixtures: the project root, a temporary run store, and one built book per session (in a temp folder)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .projects import project_copy

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
def smoke_run(tmp_path_factory):
    """The one book build of a test session, made as a user makes it: ``verifylab run --params
    examples/params-smoke.yaml`` (replay) on a copy of the project in a temporary folder."""
    from typer.testing import CliRunner

    from verifylab.cli import app

    root = project_copy(ROOT, tmp_path_factory.mktemp("book"))
    params = ROOT / "examples" / "params-smoke.yaml"
    return root, CliRunner().invoke(app, ["run", "--params", str(params), "--root", str(root)])


@pytest.fixture(scope="session")
def built_book(smoke_run) -> Path:
    """The session's built book (``_build/html``); VERIFYLAB_BOOK_HTML reuses a build."""
    reuse = os.environ.get("VERIFYLAB_BOOK_HTML")
    if reuse and (Path(reuse) / "index.html").is_file():
        return Path(reuse)
    root, result = smoke_run
    assert result.exit_code == 0, result.output
    return root / "_build" / "html"
