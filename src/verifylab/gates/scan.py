"""Find architecture gates on the all-reduce-fusion and symmetric-memory paths by parsing the source.

A *boolean gate* is an ``or`` of architecture predicates (``is_sm90_supported()``, ``_is_sm100_supported``,
``get_platform().is_sm100``, ...) that admits SM90/SM100 but not the target. It is on the fusion path when
its function is a fusion function (name mentions all-reduce fusion), when the statement it guards sets or
reads the fusion flag, or when it guards a ``raise`` whose message is about all-reduce fusion. Everything
else that looks alike (fp8, attention, MoE, model overrides) is left alone. Capability tables keyed by
compute-capability major, FlashInfer's JIT arch list and the fusion batch limit are found the same way.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from pathlib import Path
from typing import TypeVar

from verifylab.errors import GateError
from verifylab.gates.finding import Finding as Finding
from verifylab.gates.finding import Kind as Kind
from verifylab.gates.finding import Status as Status
from verifylab.gates.pcie_ipc import PCIE_IPC_ROLE as PCIE_IPC_ROLE
from verifylab.gates.pcie_ipc import pcie_ipc_findings
from verifylab.gates.prefilter import FUSION_NAME, FUSION_TEXT, worth_parsing
from verifylab.gates.source import (
    MULTICAST_MARKER,
    MULTICAST_ROLE,
    auto_enable_models,
    multicast_preflight,
    source_segment,
)
from verifylab.gates.wheel import parse_python

ARCH_PRED = re.compile(r"^_?is_sm(\d+)(?:_supported)?$")
TABLE_NAME = re.compile(r"SYMM|MULTIMEM|ALL_?REDUCE", re.I)
CAPABILITY_MAJORS = {7, 8, 9, 10, 11, 12}


def arch_of(node: ast.AST) -> int | None:
    """The SM number an architecture predicate tests (90 for ``is_sm90_supported()``), else None."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        node = node.func
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    if name is None:
        return None
    match = ARCH_PRED.match(name)
    return int(match.group(1)) if match else None


def arch_or_nodes(tree: ast.AST, nodes: list[ast.AST] | None = None) -> list[ast.BoolOp]:
    """``or`` expressions with at least two operands that are architecture predicates (``nodes``: the tree's
    nodes when already walked)."""
    found = []
    for node in nodes if nodes is not None else ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            archs = [arch_of(v) for v in node.values]
            if sum(a is not None for a in archs) >= 2:
                found.append(node)
    return found


class _Parents(ast.NodeVisitor):
    """Every node of a tree (one walk, shared by the scans of a file) and each node's parent."""

    def __init__(self, tree: ast.AST) -> None:
        self.parent: dict[ast.AST, ast.AST] = {}
        self.nodes: list[ast.AST] = [tree]
        for node in self.nodes:  # breadth first, as ast.walk; the list grows while it is read
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
                self.nodes.append(child)

    def chain(self, node: ast.AST) -> list[ast.AST]:
        out = []
        while node in self.parent:
            node = self.parent[node]
            out.append(node)
        return out


N = TypeVar("N", bound=ast.AST)


def _enclosing(chain: list[ast.AST], types: tuple[type[N], ...]) -> N | None:
    """The nearest node of one of ``types`` in ``chain`` (innermost first)."""
    return next((n for n in chain if isinstance(n, types)), None)


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _definition(
    chain: list[ast.AST], types: tuple[type[Definition], ...] = (ast.FunctionDef, ast.AsyncFunctionDef)
) -> Definition | None:
    """The nearest function (or class, where ``types`` says) enclosing the chain's first node."""
    return next((n for n in chain if isinstance(n, types)), None)


def _mentions_fusion(node: ast.AST, source: str) -> bool:
    segment = source_segment(source, node) or ""
    return bool(FUSION_TEXT.search(segment) or re.search(r"flashinfer_allreduce_fusion", segment))


def _raise_about_fusion(stmt: ast.If, source: str) -> bool:
    return any(isinstance(s, ast.Raise) and _mentions_fusion(s, source) for s in stmt.body)


def scan_file(path: Path, rel: str, target: int) -> list[Finding]:
    """All findings in one Python file (empty when it has none). A source already scanned in this process is
    not parsed again (apply and verify audit the same files; the findings are copies, free to change)."""
    source = path.read_text(encoding="utf-8")
    if not worth_parsing(source):
        return []
    return [dataclasses.replace(f) for f in _scan_source(source, rel, target)]


@functools.lru_cache(maxsize=1024)
def _scan_source(source: str, rel: str, target: int) -> tuple[Finding, ...]:
    try:
        return tuple(_scan_tree(source, rel, target))
    except RecursionError:  # parsed, but nested past what walking its tree allows
        raise GateError(f"{rel}: nested deeper than an audit walks: not a source to audit") from None


def _scan_tree(source: str, rel: str, target: int) -> list[Finding]:
    tree = parse_python(source, rel)  # a syntax error or nesting past the parser: one line naming the file
    parents = _Parents(tree)
    findings: list[Finding] = []
    for node in arch_or_nodes(tree, parents.nodes):
        archs = sorted({a for a in (arch_of(v) for v in node.values) if a is not None})
        if not ({90, 100} & set(archs)):
            continue
        chain = parents.chain(node)
        func = _definition(chain)
        func_name = func.name if func else "<module>"
        stmt = _enclosing(chain, (ast.If, ast.Return, ast.Assign, ast.Expr))
        kind: Kind | None = None
        role = ""
        if isinstance(stmt, ast.If) and _raise_about_fusion(stmt, source):
            kind, role = "raise_guard", "backend guard that raises for other archs"
        elif func is not None and FUSION_NAME.search(func.name):
            kind, role = "boolean_gate", "fusion gate of a fusion function"
        elif isinstance(stmt, ast.If) and any(_mentions_fusion(s, source) for s in stmt.body):
            kind, role = "boolean_gate", "auto-enable of all-reduce fusion"
        if kind is None:
            continue
        status: Status = "open" if target in archs else "closed"
        note = ""
        if role.startswith("auto-enable") or "auto_enable" in func_name:
            models = auto_enable_models(stmt if isinstance(stmt, ast.If) else func, tree)
            if models:
                note = (
                    "auto-enables fusion, without any flag, for: "
                    + ", ".join(models)
                    + " — once this gate admits the arch, such a 'baseline' is fused"
                )
        findings.append(
            Finding(
                rel,
                node.lineno,
                func_name,
                kind,
                source_segment(source, node) or "",
                status,
                role,
                note,
                archs=archs,
            )
        )
    findings += _single_predicate_gates(tree, source, rel, target, parents)
    findings += _tables(tree, source, rel, target, parents)
    findings += _jit_lists(tree, source, rel, target, parents)
    findings += _limits_and_preconditions(tree, source, rel, parents)
    return findings


SINGLE_ROLE = "auto-enable of all-reduce fusion (single-arch test)"


def _ifs_setting_fusion_flag(parents: _Parents) -> set[int]:
    """The ``if`` statements (their ids) whose body, at any depth, assigns an ``...allreduce_fusion...`` attribute:
    found from each such assignment up through its ancestors (walking every ``if`` body anew was quadratic)."""
    marked: set[int] = set()
    for node in parents.nodes:
        if not (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Attribute) and "allreduce_fusion" in t.attr for t in node.targets)
        ):
            continue
        child: ast.AST = node
        for ancestor in parents.chain(node):
            if isinstance(ancestor, ast.If) and any(child is s for s in ancestor.body):
                marked.add(id(ancestor))
            child = ancestor
    return marked


def _single_predicate_gates(tree, source, rel, target, parents) -> list[Finding]:
    """``if ... and is_sm100_supported(): ... enable_flashinfer_allreduce_fusion = True`` (one arch only)."""
    in_or = {id(v) for n in arch_or_nodes(tree, parents.nodes) for v in n.values}
    setting_flag = _ifs_setting_fusion_flag(parents)
    out = []
    for stmt in parents.nodes:
        if id(stmt) not in setting_flag:
            continue
        for node in ast.walk(stmt.test):
            if not isinstance(node, ast.Call | ast.Name | ast.Attribute):
                continue
            arch = arch_of(node)
            if arch not in (90, 100) or id(node) in in_or:
                continue
            if isinstance(node, ast.Name | ast.Attribute) and isinstance(parents.parent.get(node), ast.Call):
                continue  # the callee of is_smXX_supported(): the Call node is the predicate
            func = _definition(parents.chain(node))
            models = auto_enable_models(stmt, tree)
            note = (
                ("auto-enables fusion, without any flag, for: " + ", ".join(models))
                if models
                else ("auto-enables fusion on this architecture only")
            )
            out.append(
                Finding(
                    rel,
                    node.lineno,
                    func.name if func else "<module>",
                    "boolean_gate",
                    source_segment(source, node) or "",
                    "closed" if target != arch else "open",
                    SINGLE_ROLE,
                    note,
                    archs=[arch],
                )
            )
    return out


def _tables(tree, source, rel, target, parents) -> list[Finding]:
    out = []
    for node in parents.nodes:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if not (isinstance(node.value, ast.Dict) and TABLE_NAME.search(name)):
            continue
        keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, int)]
        if not keys or len(keys) != len(node.value.keys) or not set(keys) <= CAPABILITY_MAJORS:
            continue
        if not ({9, 10} & set(keys)):
            continue
        owner = _definition(parents.chain(node), (ast.ClassDef, ast.FunctionDef))
        where = f"{owner.name}.{name}" if owner else name
        status: Status = "open" if target // 10 in keys else "closed"
        note = (
            "multicast world sizes: SM12x gets none (no NVLink multicast on PCIe); the entry only avoids a "
            "KeyError crash — crash fix, not effective on PCIe"
            if "MULTIMEM" in name.upper()
            else "symmetric-memory size table: an SM12x entry avoids the KeyError crash; symmetric memory still "
            "switches itself off without multicast — crash fix, not effective on PCIe"
        )
        out.append(
            Finding(
                rel,
                node.lineno,
                where,
                "capability_table",
                f"{name} keys {sorted(keys)}",
                status,
                "capability table keyed by compute-capability major",
                note,
                archs=sorted(keys),
            )
        )
    return out


def _jit_lists(tree, source, rel, target, parents) -> list[Finding]:
    out = []
    for node in parents.nodes:
        if not isinstance(node, ast.keyword) or node.arg != "supported_major_versions":
            continue
        if not isinstance(node.value, ast.List):
            continue
        func = _definition(parents.chain(node), (ast.FunctionDef,))
        if func is None or "trtllm_allreduce_fusion" not in (source_segment(source, func) or ""):
            continue  # only the module that builds the fusion kernels is on the path
        majors = [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, int)]
        status: Status = "open" if target // 10 in majors else "closed"
        out.append(
            Finding(
                rel,
                node.value.lineno,
                func.name,
                "jit_arch_list",
                source_segment(source, node) or "",
                status,
                "FlashInfer JIT arch list of the all-reduce fusion module",
                "opening it on FlashInfer < 0.6.17 is experimental (SM12x unsupported upstream)",
                archs=majors,
            )
        )
    return out


def _limits_and_preconditions(tree, source, rel, parents) -> list[Finding]:
    out = []
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "FUSE_ALLREDUCE_MAX_BATCH_SIZE"
            and isinstance(node.value, ast.Constant)
        ):
            out.append(
                Finding(
                    rel,
                    node.lineno,
                    "<module>",
                    "limit",
                    f"FUSE_ALLREDUCE_MAX_BATCH_SIZE = {node.value.value!r}",
                    "info",
                    "fusion batch limit",
                    f"a forward of more than {node.value.value!r} tokens (batch x draft tokens in a verify) "
                    "falls back to the unfused path",
                )
            )
    out += pcie_ipc_findings(tree, source, rel)
    if "cuMulticastGetGranularity" in source and "Skipping allreduce fusion" in source:
        preflight = multicast_preflight(tree, source)
        func = next(
            (
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef) and "cuMulticastGetGranularity" in (source_segment(source, n) or "")
            ),
            None,
        )
        if preflight is None:
            out.append(
                Finding(
                    rel,
                    func.lineno if func else 1,
                    func.name if func else "<module>",
                    "precondition",
                    "workspace preflight (cuMulticastGetGranularity)",
                    "info",
                    "multicast preflight",
                    "on a box without NVLink multicast (a PCIe box) the preflight fails, logs 'Skipping "
                    "allreduce fusion' and stays on the unfused path whatever the gates say: check the server log",
                )
            )
        else:
            opened = MULTICAST_MARKER in (source_segment(source, func) or "") if func else False
            out.append(
                Finding(
                    rel,
                    preflight.check.lineno,
                    func.name if func else "<module>",
                    "precondition",
                    "a failed cuMulticastGetGranularity raises: the preflight skips fusion",
                    "open" if opened else "closed",
                    MULTICAST_ROLE,
                    "a box without NVLink multicast (a PCIe box) answers the multicast granularity query with an "
                    "error: the workspace preflight then logs 'Skipping allreduce fusion' and stays unfused"
                    + (" (opened by verifylab: the query's failure now means no multicast rounding)" if opened else ""),
                )
            )
    return out
