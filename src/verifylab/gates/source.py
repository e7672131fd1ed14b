"""Facts found in an installed package's source beyond the gates themselves: SGLang's multicast workspace
preflight (where it queries the granularity and raises), the models an auto-enable names, and whether an arch
predicate is defined anywhere."""

from __future__ import annotations

import ast
import builtins
import functools
import re
from dataclasses import dataclass
from pathlib import Path

_LINE_END = re.compile(r"\r\n|\r|\n")


@functools.lru_cache(maxsize=64)
def _source_lines(source: str) -> tuple[str, ...]:
    """The source split as ``ast.get_source_segment`` splits it (on \\r\\n, \\r, \\n only), ends kept; once per
    source: the standard function splits the whole file again on every call (seconds on server_args.py)."""
    lines, start = [], 0
    for match in _LINE_END.finditer(source):
        lines.append(source[start : match.end()])
        start = match.end()
    if start < len(source):
        lines.append(source[start:])
    return tuple(lines)


def source_segment(source: str, node: ast.AST) -> str | None:
    """``source_segment(source, node)`` with the source's lines split once (same result)."""
    first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    start, end = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
    if first is None or last is None or start is None or end is None:
        return None
    first, last = first - 1, last - 1
    lines = _source_lines(source)
    if first == last:
        return lines[first].encode()[start:end].decode()
    head = lines[first].encode()[start:].decode()
    tail = lines[last].encode()[:end].decode()
    return "".join([head, *lines[first + 1 : last], tail])


MULTICAST_ROLE = "multicast preflight"
MULTICAST_MARKER = "# verifylab precondition gate: FlashInfer >= 0.6.15's TRT-LLM workspace needs no multicast"


@dataclass
class MulticastPreflight:
    """Where SGLang's workspace preflight queries the multicast granularity and raises when that fails."""

    query: ast.Assign  # err, granularity = driver.cuMulticastGetGranularity(...)
    check: ast.If  # if err != driver.CUresult.CUDA_SUCCESS: raise RuntimeError("cuMulticastGetGranularity ...")
    error_name: str
    granularity_name: str
    success: str  # the source spelling of the success code


def multicast_preflight(tree: ast.AST, source: str) -> MulticastPreflight | None:
    """The granularity query and the ``raise`` that follows it (SGLang >= 0.5.11), or None."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, first in enumerate(body):
            if not (
                isinstance(first, ast.Assign)
                and isinstance(first.value, ast.Call)
                and isinstance(first.value.func, ast.Attribute)
                and first.value.func.attr == "cuMulticastGetGranularity"
                and isinstance(first.targets[0], ast.Tuple)
                and len(first.targets[0].elts) == 2
                and all(isinstance(e, ast.Name) for e in first.targets[0].elts)
            ):
                continue
            err, gran = (e.id for e in first.targets[0].elts if isinstance(e, ast.Name))
            for second in body[i + 1 : i + 3]:  # verifylab's opened form puts its own check in between
                if (
                    isinstance(second, ast.If)
                    and isinstance(second.test, ast.Compare)
                    and isinstance(second.test.left, ast.Name)
                    and second.test.left.id == err
                    and isinstance(second.test.ops[0], ast.NotEq)
                    and any(
                        isinstance(stmt, ast.Raise)
                        and "cuMulticastGetGranularity" in (source_segment(source, stmt) or "")
                        for stmt in second.body
                    )
                ):
                    success = source_segment(source, second.test.comparators[0]) or ""
                    return MulticastPreflight(first, second, err, gran, success)
    return None


def predicate_defined(root: Path, name: str) -> bool:
    """Whether the package under ``root`` defines (or maps) the predicate ``name`` anywhere."""
    pattern = re.compile(rf"(def {name}\b|^{name}\s*=|[\"']{name}[\"']|\.{name}\b)", re.M)
    for pkg in ("sglang", "flashinfer"):
        base = root / pkg
        if not base.is_dir():
            continue
        for path in base.rglob("*.py"):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if name in text and pattern.search(text):
                return True
    return False


def _string_list(node: ast.AST) -> list[str] | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("frozenset", "set", "tuple", "list")
        and len(node.args) == 1
    ):
        node = node.args[0]
    if (
        isinstance(node, ast.List | ast.Tuple | ast.Set)
        and node.elts
        and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
    ):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


def auto_enable_models(scope: ast.AST | None, tree: ast.Module) -> list[str]:
    """Model architectures an auto-enable condition lists (``model_arch in [...]`` or a module constant)."""
    if scope is None:
        return []
    constants = {
        n.targets[0].id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
    }
    for node in ast.walk(scope):
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.In) for op in node.ops):
            for comp in node.comparators:
                values = _string_list(comp)
                if values is None and isinstance(comp, ast.Name) and comp.id in constants:
                    values = _string_list(constants[comp.id])
                if values and any(v.endswith(("ForCausalLM", "ForConditionalGeneration")) for v in values):
                    return values
    return []


def bound_names(tree: ast.AST) -> set[str]:
    """Every name the module binds anywhere: definitions, imports, assignment and loop targets, arguments, ``as``
    names, ``global``s. A name used but bound nowhere (and not a builtin) raises NameError when it runs."""
    names: set[str] = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
        elif (isinstance(node, ast.ExceptHandler) and node.name) or (
            isinstance(node, ast.MatchAs | ast.MatchStar) and node.name
        ):
            names.add(node.name)
    return names


def module_bindings(module: ast.AST) -> frozenset[str] | None:
    """What ``module`` binds (:func:`bound_names`), or None where a star import may bind anything: read once per
    module, then asked of each of its gates (each gate walked the whole module again)."""
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(module)):
        return None
    return frozenset(bound_names(module))


@functools.lru_cache(maxsize=1024)
def source_bindings(source: bytes) -> frozenset[str] | None:
    """:func:`module_bindings` of a module's source, parsed once per process (apply and verify audit the same files
    again)."""
    return module_bindings(ast.parse(source))


def unresolved_names(expression: str, bindings: frozenset[str] | None) -> list[str]:
    """The names ``expression`` (an opened gate) reads that its module binds nowhere (``bindings``, from
    :func:`module_bindings`; None: nothing can be called undefined), in order."""
    if bindings is None:
        return []
    try:
        used = [n.id for n in ast.walk(ast.parse(expression.strip(), mode="eval")) if isinstance(n, ast.Name)]
    except SyntaxError:
        return []
    return list(dict.fromkeys(name for name in used if name not in bindings))
