"""Plan minimal, byte-exact edits that open the gates found by ``scan`` for a target architecture.

Edits are insertions only, in the file's own spelling: ``or is_sm120_supported()`` after
``is_sm100_supported()``, ``or _is_sm120_supported`` (plus the cached module variable and the import when
missing), ``or get_platform().is_sm120``; a ``12:`` entry in capability tables (no multicast world sizes;
sizes copied from the SM100 entry); ``12`` in FlashInfer's JIT arch list.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from verifylab.errors import GateError
from verifylab.gates.scan import ARCH_PRED, SINGLE_ROLE, Finding, arch_of, arch_or_nodes
from verifylab.gates.source import (
    MULTICAST_MARKER,
    MULTICAST_ROLE,
    multicast_preflight,
    predicate_defined,
    source_segment,
)


@dataclass
class FilePlan:
    """The edits for one file: byte offset -> inserted text, plus what they do."""

    rel: str
    original: bytes
    inserts: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, offset: int, text: str, note: str) -> None:
        self.inserts[offset] = self.inserts.get(offset, "") + text
        self.notes.append(note)

    def result(self) -> bytes:
        out = self.original
        for offset in sorted(self.inserts, reverse=True):
            out = out[:offset] + self.inserts[offset].encode("utf-8") + out[offset:]
        return out


class _Offsets:
    """Convert ast (line, UTF-8 byte column) positions to byte offsets in the file."""

    def __init__(self, data: bytes) -> None:
        self.starts = [0]
        for i, byte in enumerate(data):
            if byte == 0x0A:
                self.starts.append(i + 1)
        self.data = data

    def at(self, line: int | None, col: int | None) -> int:
        """Byte offset of (line, column); ``ast.parse`` sets both on every node it positions."""
        if line is None or col is None:
            raise GateError("a node without a source position: the file was not parsed from source")
        return self.starts[line - 1] + col

    def line_end(self, line: int | None) -> int:
        if line is None:
            raise GateError("a node without a source position: the file was not parsed from source")
        nxt = self.starts[line] if line < len(self.starts) else len(self.data) + 1
        return nxt - 1

    def indent(self, line: int) -> str:
        start = self.starts[line - 1]
        text = self.data[start : self.line_end(line)].decode("utf-8")
        return text[: len(text) - len(text.lstrip())]


def _renamed(segment: str, old: int, new: int) -> str:
    return re.sub(rf"(is_sm){old}(_supported)?\b", rf"\g<1>{new}\g<2>", segment)


def _ensure_import(tree: ast.Module, offsets: _Offsets, plan: FilePlan, name: str, like: str, root: Path) -> None:
    """Make ``name`` importable in the module, next to the import of ``like``; refuse if that is unsafe."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            return
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return
    if not predicate_defined(root, name):
        raise GateError(f"{plan.rel}: the installed package defines no '{name}': cannot open this gate safely")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            alias = next((a for a in node.names if a.name == like), None)
            if alias is None:
                continue
            end = offsets.at(alias.end_lineno, alias.end_col_offset)
            if alias.lineno == node.lineno:  # single-line import
                plan.add(end, f", {name}", f"import {name}")
            else:
                after = offsets.data[end : end + 1]
                indent = offsets.indent(alias.lineno)
                if after == b",":
                    plan.add(end + 1, f"\n{indent}{name},", f"import {name}")
                else:
                    plan.add(end, f",\n{indent}{name}", f"import {name}")
            return
    raise GateError(f"{plan.rel}: '{like}' is not imported with 'from ... import': cannot add '{name}' safely")


def plan_file(path: Path, rel: str, findings: list[Finding], target: int, root: Path) -> FilePlan:
    """Edits that open every closed finding of one file."""
    data = path.read_bytes()
    source = data.decode("utf-8")
    tree = ast.parse(source, filename=rel)
    offsets = _Offsets(data)
    plan = FilePlan(rel, data)
    closed_lines = {
        (f.line, f.expression) for f in findings if f.status == "closed" and f.kind in ("boolean_gate", "raise_guard")
    }
    module_vars_added: set[str] = set()
    for node in arch_or_nodes(tree):
        segment = source_segment(source, node) or ""
        if (node.lineno, segment) not in closed_lines:
            continue
        best = max((v for v in node.values if arch_of(v) is not None), key=lambda v: arch_of(v) or 0)
        best_arch = arch_of(best) or 0
        new_operand = _renamed(source_segment(source, best) or "", best_arch, target)
        last = node.values[-1]
        plan.add(
            offsets.at(last.end_lineno, last.end_col_offset),
            f" or {new_operand}",
            f"line {node.lineno}: add 'or {new_operand}'",
        )
        pred = best.func if isinstance(best, ast.Call) else best
        if isinstance(pred, ast.Name) and pred.id.startswith("_"):
            new_var = _renamed(pred.id, best_arch, target)
            if new_var not in module_vars_added and not _module_assigns(tree, new_var):
                assign = _module_assignment(tree, pred.id)
                if assign is None:
                    raise GateError(f"{rel}: '{pred.id}' is not a module-level variable: cannot add '{new_var}' safely")
                rhs = source_segment(source, assign.value) or ""
                new_rhs = _renamed(rhs, best_arch, target)
                plan.add(
                    offsets.line_end(assign.end_lineno),
                    f"\n{new_var} = {new_rhs}",
                    f"add module variable {new_var} = {new_rhs}",
                )
                module_vars_added.add(new_var)
                _needs_callable(tree, offsets, plan, assign.value, best_arch, target, root)
        elif isinstance(pred, ast.Name):
            _ensure_import(tree, offsets, plan, _renamed(pred.id, best_arch, target), pred.id, root)
        elif isinstance(pred, ast.Attribute) and not predicate_defined(
            root, pred.attr.replace(str(best_arch), str(target))
        ):
            raise GateError(f"{rel}: no platform predicate '{_renamed(pred.attr, best_arch, target)}' in this install")
    singles = {(f.line, f.expression) for f in findings if f.status == "closed" and f.role == SINGLE_ROLE}
    for site in ast.walk(tree):
        if not isinstance(site, ast.Call | ast.Name | ast.Attribute) or arch_of(site) is None:
            continue
        segment = source_segment(source, site) or ""
        if (site.lineno, segment) not in singles:
            continue
        singles.discard((site.lineno, segment))
        old = arch_of(site) or 0
        new_operand = _renamed(segment, old, target)
        plan.add(offsets.at(site.lineno, site.col_offset), "(", f"line {site.lineno}: wrap '{segment}'")
        plan.add(
            offsets.at(site.end_lineno, site.end_col_offset),
            f" or {new_operand})",
            f"line {site.lineno}: add 'or {new_operand}'",
        )
        pred = site.func if isinstance(site, ast.Call) else site
        if isinstance(pred, ast.Name) and not pred.id.startswith("_"):
            _ensure_import(tree, offsets, plan, _renamed(pred.id, old, target), pred.id, root)
    _plan_tables_and_lists(tree, source, offsets, plan, findings, target)
    if any(f.status == "closed" and f.role == MULTICAST_ROLE for f in findings):
        _plan_multicast_preflight(tree, source, offsets, plan)
    return plan


def _plan_multicast_preflight(tree: ast.Module, source: str, offsets: _Offsets, plan: FilePlan) -> None:
    """After the multicast granularity query, turn its failure into 'no multicast rounding' (granularity 1), so
    the preflight's ``raise`` no longer fires on a box without NVLink multicast. Only planned when the audit
    found the installed FlashInfer's TRT-LLM workspace allocates without multicast."""
    found = multicast_preflight(tree, source)
    if found is None:
        raise GateError(f"{plan.rel}: the multicast preflight changed shape: not patching it")
    indent = offsets.indent(found.query.lineno)
    err, gran, ok = found.error_name, found.granularity_name, found.success
    plan.add(
        offsets.line_end(found.query.end_lineno),
        f"\n{indent}if {err} != {ok}:  {MULTICAST_MARKER}\n{indent}    {err}, {gran} = {ok}, 1",
        f"line {found.query.lineno}: a failed multicast granularity query means no multicast rounding",
    )


def _needs_callable(tree, offsets, plan, value: ast.AST, old: int, new: int, root: Path) -> None:
    for node in ast.walk(value):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and arch_of(node) == old:
            _ensure_import(tree, offsets, plan, _renamed(node.func.id, old, new), node.func.id, root)
        if (
            isinstance(node, ast.Attribute)
            and ARCH_PRED.match(node.attr)
            and arch_of(node) == old
            and not predicate_defined(root, _renamed(node.attr, old, new))
        ):
            raise GateError(f"{plan.rel}: no platform predicate '{_renamed(node.attr, old, new)}' in this install")


def _module_assignment(tree: ast.Module, name: str) -> ast.Assign | None:
    return next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
            and n.targets[0].id == name
        ),
        None,
    )


def _module_assigns(tree: ast.Module, name: str) -> bool:
    return _module_assignment(tree, name) is not None


def _plan_tables_and_lists(tree, source, offsets, plan, findings, target) -> None:
    major = target // 10
    tables = {f.line for f in findings if f.kind == "capability_table" and f.status == "closed"}
    lists = {f.line for f in findings if f.kind == "jit_arch_list" and f.status == "closed"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.lineno in tables and isinstance(node.value, ast.Dict):
            target_name = node.targets[0]
            name = target_name.id if isinstance(target_name, ast.Name) else ast.unparse(target_name)
            keys = [k.value if isinstance(k, ast.Constant) else None for k in node.value.keys]
            donor = node.value.values[keys.index(10)] if 10 in keys else node.value.values[-1]
            if "MULTIMEM" in name.upper():
                value, why = "[]", "no multicast world sizes (PCIe has no NVLink multicast)"
            else:
                value, why = source_segment(source, donor) or "", "sizes copied from the SM100 entry"
            last = node.value.values[-1]
            end = offsets.at(last.end_lineno, last.end_col_offset)
            last_key = node.value.keys[-1]
            key_line = last_key.lineno if last_key is not None else last.lineno
            indent = offsets.indent(key_line)
            if key_line == node.lineno:  # one-line dict
                plan.add(end, f", {major}: {value}", f"{name}: add {major}: {value} ({why})")
            elif offsets.data[end : end + 1] == b",":
                plan.add(end + 1, f"\n{indent}{major}: {value},", f"{name}: add {major}: entry ({why})")
            else:
                plan.add(end, f",\n{indent}{major}: {value}", f"{name}: add {major}: entry ({why})")
        if isinstance(node, ast.List) and node.lineno in lists and all(isinstance(e, ast.Constant) for e in node.elts):
            parent_kw = source_segment(source, node)
            if parent_kw is None or not node.elts:
                continue
            last = node.elts[-1]
            plan.add(
                offsets.at(last.end_lineno, last.end_col_offset),
                f", {major}",
                f"supported_major_versions: add {major} (experimental before FlashInfer 0.6.17)",
            )
