"""One row of a verify-path audit (:class:`VerifyGate`), how a tree's file is read (:data:`Read`), and the AST helpers
the readers of ``gates.default_backend`` and ``gates.verify_path`` share."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from verifylab.gates.wheel import parse_python

Read = Callable[[str], str | None]  # a tree's file by its path under the tree (sglang/..., flashinfer/...)


@dataclass(frozen=True)
class VerifyGate:
    """One thing on the verify path: what it is, for which model shape and GPU, where, the condition, the value."""

    package: str
    version: str
    item: str
    shape: str
    gpu: str
    file: str
    line: int
    function: str
    condition: str
    value: str
    status: str  # closed (keeps the fast path off on SM120), open, info
    note: str = ""


def name_of(node: ast.AST) -> str:
    """The last name of a call, attribute or name (``get_platform().is_sm100`` -> ``is_sm100``)."""
    if isinstance(node, ast.Call):
        return name_of(node.func)
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def functions_in(tree: ast.AST) -> Iterable[ast.FunctionDef]:
    return (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))


def parse(text: str, where: str) -> ast.AST:
    """``text`` parsed (one line naming ``where`` where it is not Python)."""
    return parse_python(text, where)
