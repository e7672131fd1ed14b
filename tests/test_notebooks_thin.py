"""Notebooks are thin: parameter assignments (scalar or list literals), imports and single library calls — one
call whose arguments are names, attributes or literals (no nested call, subscript or arithmetic; ``globals()``,
which hands the parameters cell's names to the chapter's ``Params``, aside). A notebook imports its chapter
only, and its parameters cell is its chapter's ``Params`` written out."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.py"))


def _is_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return isinstance(node.operand, ast.Constant)
    return isinstance(node, ast.List) and all(_is_literal(e) for e in node.elts)


def _is_name_or_attribute(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _is_globals(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "globals"


def _is_single_call(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call) or not _is_name_or_attribute(node.func):
        return False
    values = [*node.args, *(k.value for k in node.keywords)]
    plain = all(k.arg is not None for k in node.keywords) and not any(isinstance(a, ast.Starred) for a in node.args)
    return plain and all(_is_literal(v) or _is_name_or_attribute(v) or _is_globals(v) for v in values)


def thick_statements(source: str) -> list[str]:
    """``line: code`` of every top-level statement that is not a literal assignment, an import or a single call."""
    found = []
    for stmt in ast.parse(source).body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            continue
        named = isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets)
        if named and (_is_literal(stmt.value) or _is_single_call(stmt.value)):
            continue
        if isinstance(stmt, ast.Expr) and _is_single_call(stmt.value):
            continue
        found.append(f"{stmt.lineno}: {ast.unparse(stmt)[:80]}")
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_holds_only_parameters_imports_and_single_calls(notebook: Path):
    assert thick_statements(notebook.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "statement",
    [
        'tables["counts"]',  # subscript
        "store = RunStore(params.data_dir / 'runs')",  # arithmetic in an argument
        "chapter.show(chapter.table(ev))",  # nested call
        "outlook",  # a bare name displays a value computed elsewhere
        "x = [r.command for r in recs]",  # a comprehension
        "chapter.table(ev).round(2)",  # a call on a call's result
        "chapter.table(*args)",  # unpacking hides what is passed
    ],
)
def test_the_parser_refuses_what_is_not_a_single_call(statement: str):
    assert thick_statements(statement) != []


def test_the_parser_accepts_the_thin_forms():
    source = "\n".join(
        [
            'mode = "replay"',
            "runs = [1, 2]",
            "import pandas as pd",
            "ev = Evidence(params.data_dir)",
            "chapter.live(params, ev)",
        ]
    )
    assert thick_statements(source) == []


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_imports_its_chapter_only(notebook: Path):
    imports = [
        s for s in ast.parse(notebook.read_text(encoding="utf-8")).body if isinstance(s, ast.Import | ast.ImportFrom)
    ]
    assert [ast.unparse(s) for s in imports] == [
        f"from verifylab.chapters import {_chapter_module(notebook)} as chapter"
    ]


def _chapter_module(notebook: Path) -> str:
    number, _, _ = notebook.stem.partition("_")
    return next(p.stem for p in CHAPTERS.glob(f"ch{number}_*.py"))


CHAPTERS = Path(__file__).resolve().parents[1] / "src" / "verifylab" / "chapters"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_committed_cell_points_to_params_and_the_converted_one_is_params_written_out(notebook: Path, tmp_path):
    import papermill

    from verifylab.chapters.notebook_cell import CELL_MARK, POINTER
    from verifylab.chapters.registry import CHAPTER_PARAMS
    from verifylab.publish.build import to_notebook

    committed = notebook.read_text(encoding="utf-8").split(CELL_MARK, 1)[1].split("\n# %%", 1)[0]
    assert committed.strip() == POINTER.strip(), "declare parameters in verifylab/chapters/params.py only"
    to_notebook(notebook, converted := tmp_path / f"{notebook.stem}.ipynb")
    declared = {name: p["default"] for name, p in papermill.inspect_notebook(str(converted)).items()}
    model = CHAPTER_PARAMS[notebook.stem]
    assert set(declared) == set(model.model_fields)  # every parameter is in the cell
    # and the cell's values are the defaults (a computed one, the launcher, written as its stand-in None)
    in_cell = model.validated(**{k: ast.literal_eval(v) for k, v in declared.items()})
    assert in_cell.model_dump() == model.validated().model_dump()


def test_a_new_field_reaches_the_cell_with_its_description_and_a_long_one_goes_above():
    from pydantic import BaseModel, Field

    from verifylab.chapters.notebook_cell import LINE, parameters_cell, with_parameters_cell

    class Example(BaseModel):
        tokens: int = Field(512, description="tokens per request")
        hosts: list[str] = Field(default_factory=lambda: ["a", "b"], description="x" * LINE)
        path: Path | None = None

    cell = parameters_cell(Example)
    assert cell.splitlines() == [
        "tokens: int = 512  # tokens per request",
        f"# {'x' * LINE}",
        'hosts: list[str] = ["a", "b"]',
        "path = None",  # a union is left unannotated: papermill would drop a parameter annotated with "|"
    ]
    source = '# %%\nx = 1\n\n# %% tags=["parameters"]\nold = 1\n\n# %%\nimport y\n'
    assert with_parameters_cell(source, Example, Path("nb.py")) == (
        '# %%\nx = 1\n\n# %% tags=["parameters"]\n' + cell + "\n# %%\nimport y\n"
    )


def test_a_parameter_added_to_params_reaches_the_notebook_papermill_runs(monkeypatch, tmp_path):
    """Adding a chapter parameter touches its Params (and the example YAMLs that set it), never the notebook."""
    import papermill
    from pydantic import Field, create_model

    from verifylab.chapters import registry
    from verifylab.publish.build import to_notebook

    base = registry.CHAPTER_PARAMS["02_benchmarks"]
    grown = create_model("Grown", __base__=base, settle_s=(float, Field(1.5, description="seconds to settle")))
    monkeypatch.setitem(registry.CHAPTER_PARAMS, "02_benchmarks", grown)
    (notebook,) = [n for n in NOTEBOOKS if n.stem == "02_benchmarks"]
    to_notebook(notebook, converted := tmp_path / "02.ipynb")
    declared = papermill.inspect_notebook(str(converted))
    assert declared["settle_s"]["default"] == "1.5" and declared["settle_s"]["help"] == "seconds to settle"
    assert declared["settle_s"]["inferred_type_name"] == "float"  # papermill --help-notebook shows its type


QUANTITY = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?\s?(?:ms|µs|us|tok/s|GB/s|MB/s|concurrent requests|warm-ups)(?![\w/])"
)


def _markdown_quantities(source: str) -> list[str]:
    import jupytext

    cells = jupytext.reads(source, fmt="py:percent").cells
    return [m.group(0) for c in cells if c.cell_type == "markdown" for m in QUANTITY.finditer(c.source)]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebooks_prose_types_no_quantity(notebook: Path):
    """A number with a unit in a page's prose is formatted from the value that computes it (a chapter's finding or
    caption cell), never typed in a notebook's markdown, where it would drift from the data."""
    assert _markdown_quantities(notebook.read_text(encoding="utf-8")) == [], notebook.name


def test_the_quantity_scan_finds_a_typed_one():
    typed = "# %% [markdown]\n# About 30 ms, 92.6 tok/s, 2.7 GB/s and 30 concurrent requests; SGLang 0.5.9, 8 GPUs.\n"
    assert _markdown_quantities(typed) == ["30 ms", "92.6 tok/s", "2.7 GB/s", "30 concurrent requests"]
