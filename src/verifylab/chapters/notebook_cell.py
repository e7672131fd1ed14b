"""Each notebook's parameters cell, written from its chapter's ``Params`` model when the notebook is converted for
papermill (``verifylab notebook``, ``verifylab run``, ``make book``): the model is the one declaration of a
chapter's parameters (names, defaults, what each does), and the committed notebook only points to it, so adding
a parameter touches the model and the example YAMLs, never a notebook.

``python -m verifylab.chapters.notebook_cell`` writes the pointer into each committed cell (``make notebooks``);
``--check`` fails naming each notebook whose cell holds anything else, which ``make lint`` runs."""

from __future__ import annotations

import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from verifylab.chapters.registry import CHAPTER_PARAMS

CELL_MARK = '# %% tags=["parameters"]\n'
POINTER = (  # the committed cell: what papermill reads is written at conversion
    "# This chapter's parameters are its Params model (src/verifylab/chapters/params.py): `verifylab notebook`\n"
    "# writes them here, with their defaults and what each does, when it converts this file for papermill.\n"
)
LINE = 120  # ruff's line length: a longer line takes its comment on the line above


def _literal(value: Any) -> str:
    """``value`` as the cell writes it (double quotes, as ruff formats)."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value), ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    raise TypeError(f"a parameter default of type {type(value).__name__} cannot be written into a notebook")


_BUILTIN_NAMES = {bool: "bool", int: "int", float: "float", str: "str", Path: "str"}


def type_name(annotation: Any) -> str | None:
    """``annotation`` as the cell writes it (``int``, ``list[str]``): names a notebook evaluates without imports
    and papermill parses (a path is written as the string it is given as); None where there is none (unions)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return None  # papermill reads no "|" in an annotation (it would drop the parameter): left unannotated
    if origin is list:
        inner = type_name(args[0]) if args else None
        return f"list[{inner}]" if inner else "list"
    if origin is typing.Literal:
        return type_name(type(args[0])) if args else None
    return _BUILTIN_NAMES.get(annotation)


def parameters_cell(model: type[BaseModel]) -> str:
    """The body of the parameters cell: one ``name: type = default  # what it does`` line per field of ``model``
    (papermill --help-notebook shows the type and the comment)."""
    lines = []
    for name, field in model.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if "notebook_default" in extra:  # a default computed on this machine (a path) is written as its stand-in
            kind, default = None, extra["notebook_default"]
        else:
            kind, default = type_name(field.annotation), field.get_default(call_default_factory=True)
        line = f"{name}{f': {kind}' if kind else ''} = {_literal(default)}"
        comment = field.description
        if comment and len(f"{line}  # {comment}") <= LINE:
            line = f"{line}  # {comment}"
        elif comment:
            lines.append(f"# {comment}")
        lines.append(line)
    return "\n".join(lines) + "\n"


def _with_cell(source: str, body: str, path: Path) -> str:
    """``source`` (a jupytext percent notebook) with ``body`` as its parameters cell."""
    if CELL_MARK not in source:
        raise ValueError(f"{path}: no parameters cell ({CELL_MARK.strip()})")
    head, rest = source.split(CELL_MARK, 1)
    _, sep, tail = rest.partition("\n# %%")
    return head + CELL_MARK + body + sep + tail


def with_parameters_cell(source: str, model: type[BaseModel], path: Path) -> str:
    """``source`` (a jupytext percent notebook) with its parameters cell written from ``model``."""
    return _with_cell(source, parameters_cell(model), path)


def with_parameters(source: str, chapter: str, path: Path) -> str:
    """``source`` (a committed chapter notebook) with its parameters cell written from the chapter's model; a
    notebook without a model in verifylab/chapters/params.py keeps its own cell."""
    model = CHAPTER_PARAMS.get(chapter)
    return source if model is None else with_parameters_cell(source, model, path)


def sync_notebooks(folder: Path, write: bool) -> list[Path]:
    """The committed notebooks whose parameters cell is not the pointer to their model (rewritten when ``write``)."""
    stale = []
    for chapter in CHAPTER_PARAMS:
        path = folder / f"{chapter}.py"
        source = path.read_text(encoding="utf-8")
        wanted = _with_cell(source, POINTER, path)
        if wanted != source:
            stale.append(path)
            if write:
                tmp = path.with_suffix(".py.tmp")
                tmp.write_text(wanted, encoding="utf-8")
                tmp.replace(path)
    return stale


def main(argv: list[str]) -> int:
    check = "--check" in argv
    folder = Path(next((a for a in argv if not a.startswith("--")), "notebooks"))
    stale = sync_notebooks(folder, write=not check)
    for path in stale:
        print(f"{path}: parameters cell {'is not the pointer to' if check else 'now points to'} its chapter's Params")
    if check and stale:
        print("declare parameters in verifylab/chapters/params.py only; `make notebooks` writes the pointer back")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
