"""A data folder that holds no run of a kind a chapter draws (a box's own folder before it measured that kind): each
exhibit that has nothing to draw says so and names what measures it, and no chapter fails on a missing column.
Chapter 04 prices the case study with a model fitted on measurements: without them it fails naming what it needs."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import jupytext
import pytest

from verifylab.chapters.registry import CHAPTERS
from verifylab.errors import VerifylabError

FITTED_ON_RUNS = {"04_fusion_vs_elimination"}  # chapters that cannot be drawn without runs, and say so


def shown(value: object) -> object:
    """What the page gets of a cell's value (its display), computed here so that an error is raised, not printed."""
    for method in ("_repr_mimebundle_", "_repr_markdown_", "_repr_html_"):
        if hasattr(value, method):
            return getattr(value, method)()
    return repr(value)


def execute_in_process(notebook: Path, data_dir: Path) -> list[object]:
    """Every code cell of a chapter notebook run here in replay mode on ``data_dir``: what each cell showed."""
    namespace: dict[str, object] = {"__name__": "__main__", "mode": "replay", "data_dir": str(data_dir)}
    outputs = []
    for cell in jupytext.read(notebook).cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, notebook.name, "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), notebook.name, "eval"), namespace)
            outputs.append(shown(value))
    return outputs


@pytest.fixture(scope="module")
def no_runs(repo_root, tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("box") / "data"
    shutil.copytree(repo_root / "data", data, ignore=shutil.ignore_patterns("runs"))
    (data / "runs").mkdir()
    return data


@pytest.mark.parametrize("chapter", [c.name for c in CHAPTERS])
def test_a_chapter_on_a_folder_without_runs_says_what_is_missing(repo_root, no_runs, chapter):
    notebook = repo_root / "notebooks" / f"{chapter}.py"
    if chapter in FITTED_ON_RUNS:
        with pytest.raises(VerifylabError, match=r"no (run|speculation grid) under"):
            execute_in_process(notebook, no_runs)
        return
    outputs = execute_in_process(notebook, no_runs)
    notices = [o for o in outputs if "Nothing to show yet: no run under" in str(o)]
    if chapter in {"01_environment_and_gates", "02_benchmarks", "03_verify_breakdown"}:
        assert notices, "an exhibit with nothing to draw says so"
