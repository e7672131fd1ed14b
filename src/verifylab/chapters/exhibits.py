"""Every numbered exhibit of the book by its name (``tbl-public-speculation``), read from the chapter notebooks: the
cell a figure's metadata names and the one call it makes (``chapter.function(ev, ...)``), so that one exhibit can
be rebuilt alone from a data folder, as ``verifylab exhibit NAME`` does and each caption's Reproduce line says."""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifylab.chapters.registry import CHAPTERS, parameters_for
from verifylab.errors import ParameterError
from verifylab.store.evidence import Evidence

_MODULE = re.compile(r"^from verifylab\.chapters import (\w+) as chapter\s*$", re.M)


@dataclass(frozen=True)
class ExhibitCall:
    """One exhibit: its name, the chapter notebook it is in, the chapter module and the call that makes it."""

    name: str
    chapter: str
    module: str
    function: str
    arguments: tuple[Any, ...]  # the evidence, the chapter's default parameters, or literals
    call: str  # as written in the notebook

    @property
    def uses_parameters(self) -> bool:
        """Whether the chapter's parameters make it (it is then rebuilt with their defaults, as `make book` runs)."""
        return any(a is _PARAMS for a in self.arguments)

    def build(self, data_dir: Path, ev: Evidence | None = None, parameters: dict[str, Any] | None = None) -> Any:
        """The exhibit made from ``data_dir`` (a Table, a Figure or prose), as the replayed chapter makes it;
        ``parameters``: the chapter's (a params file's; default: its defaults, as `make book` runs it); ``ev``: that
        folder's evidence already read (several exhibits share what it derived)."""
        module = importlib.import_module(f"verifylab.chapters.{self.module}")
        given = parameters_for(self.chapter, {**(parameters or {}), "mode": "replay", "data_dir": data_dir})
        params = module.Params.validated(**given)
        ev = ev if ev is not None else Evidence(data_dir)
        args = [params if a is _PARAMS else ev if a is _EV else a for a in self.arguments]
        return getattr(module, self.function)(*args)


_PARAMS, _EV = object(), object()  # stand for the chapter's parameters and its evidence in an exhibit's arguments


def _call(code: str, where: str) -> tuple[str, tuple[Any, ...]]:
    """``chapter.function(ev, params, "literal")`` as (function, arguments); any other code is refused."""
    try:
        node = ast.parse(code.strip(), mode="eval").body
    except SyntaxError:
        raise ParameterError(f"{where}: not one call ({code.strip()[:80]!r})") from None
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "chapter"
        and not node.keywords
    ):
        raise ParameterError(f"{where}: an exhibit cell is one call chapter.function(ev, ...), not {code.strip()!r}")
    rest: list[Any] = []
    for arg in node.args:
        if isinstance(arg, ast.Name) and arg.id in ("params", "ev"):
            rest.append(_PARAMS if arg.id == "params" else _EV)
        elif isinstance(arg, ast.Constant):
            rest.append(arg.value)
        else:
            raise ParameterError(f"{where}: argument {ast.unparse(arg)!r} is none of ev, params or a literal")
    return node.func.attr, tuple(rest)


def notebook_exhibits(notebook: Path) -> list[ExhibitCall]:
    """The exhibits of one chapter notebook, in page order (its cells read by jupytext, as the build reads them)."""
    import jupytext

    module = _MODULE.search(notebook.read_text(encoding="utf-8"))
    if module is None:
        raise ParameterError(f"{notebook}: no 'from verifylab.chapters import ... as chapter' line")
    found = []
    for cell in jupytext.read(notebook, fmt="py:percent").cells:
        name = cell.metadata.get("mystnb", {}).get("figure", {}).get("name")
        if name is None:
            continue
        function, arguments = _call(cell.source, f"{notebook.name}, exhibit {name}")
        found.append(ExhibitCall(name, notebook.stem, module.group(1), function, arguments, cell.source.strip()))
    return found


def book_exhibits(root: Path) -> dict[str, ExhibitCall]:
    """Every exhibit of the book by name (names are unique across the chapters: Sphinx refers to them so)."""
    out: dict[str, ExhibitCall] = {}
    for chapter in CHAPTERS:
        for exhibit in notebook_exhibits(chapter.notebook(root)):
            if exhibit.name in out:
                raise ParameterError(f"exhibit name {exhibit.name!r} is used by {out[exhibit.name].chapter} too")
            out[exhibit.name] = exhibit
    return out
