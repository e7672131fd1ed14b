"""Open the closed gates (``apply``: every file or none, journalled, backups and hashes in
``root/.verifylab-gates/``) and check that the opened gates admit the target (``verify``)."""

from __future__ import annotations

import ast
import difflib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from verifylab.errors import GateError
from verifylab.gates.inventory import Audit, audit
from verifylab.gates.lock import tree_lock
from verifylab.gates.patch import FilePlan, plan_file
from verifylab.gates.scan import Finding, arch_of
from verifylab.gates.source import MULTICAST_ROLE, module_bindings, unresolved_names
from verifylab.gates.state import STATE_DIR, recover_for_apply, remove_state, remove_temps
from verifylab.gates.state import TreeState as TreeState
from verifylab.gates.state import revert as revert
from verifylab.gates.state import tree_state as tree_state
from verifylab.gates.tree import KnownFiles
from verifylab.iorw import atomic_write_bytes, atomic_write_json, sha256_bytes, sha256_of


def plan(aud: Audit) -> dict[str, FilePlan]:
    """Edits for every closed gate, per file (files without edits are absent)."""
    by_file: dict[str, list[Finding]] = {}
    for f in aud.closed:
        by_file.setdefault(f.file, []).append(f)
    plans = {}
    for rel, findings in by_file.items():
        file_plan = plan_file(aud.root / rel, rel, findings, aud.target, aud.root)
        if file_plan.inserts:
            plans[rel] = file_plan
    return plans


def unified_diff(plans: dict[str, FilePlan]) -> str:
    chunks: list[str] = []
    for rel, p in sorted(plans.items()):
        chunks.extend(
            difflib.unified_diff(
                p.original.decode().splitlines(keepends=True),
                p.result().decode().splitlines(keepends=True),
                f"a/{rel}",
                f"b/{rel}",
            )
        )
    return "".join(chunks)


@dataclass
class ApplyResult:
    changed: list[str]
    diff: str
    notes: list[str]
    manifest: Path | None


def writable(path: Path) -> bool:
    """Whether ``path`` can be changed: permission bits (non-root) and a read-only mount (root too)."""
    if os.statvfs(path).f_flag & os.ST_RDONLY:
        return False
    return os.access(path, os.W_OK)


def _write_file(path: Path, data: bytes) -> None:
    """One file write (a seam for fault-injection tests)."""
    atomic_write_bytes(path, data)


def apply(
    root: Path,
    arch: str = "sm120",
    dry_run: bool = False,
    expected: dict[str, str] | None = None,
    known: KnownFiles | None = None,
) -> ApplyResult:
    """Open the gates: all files or none. ``expected``: sha256 per file from an earlier audit; ``known``: the files
    the audited matrix lists per version (a tree missing one is refused). An interrupted earlier apply (or one a
    reinstall undid) is rolled back first. One apply or revert per tree at a time."""
    if dry_run:
        return _apply(root, arch, True, expected, known)
    with tree_lock(root, "apply"):
        recover_for_apply(root)
        return _apply(root, arch, False, expected, known)


def _apply(
    root: Path, arch: str, dry_run: bool, expected: dict[str, str] | None, known: KnownFiles | None
) -> ApplyResult:
    aud = audit(root, arch, known)
    if expected:
        for rel, digest in expected.items():
            path = root / rel
            if path.is_file() and sha256_of(path) != digest:
                raise GateError(f"{rel} changed since the audit (sha256 differs): audit again; nothing was changed")
    plans = plan(aud)
    notes = [f"{rel}: {n}" for rel, p in sorted(plans.items()) for n in p.notes]
    diff = unified_diff(plans)
    if dry_run or not plans:
        return ApplyResult(sorted(plans), diff, notes, None)
    for rel, p in plans.items():
        try:
            compile(p.result(), rel, "exec")
        except SyntaxError as exc:
            raise GateError(
                f"{rel}: the patched file would not compile ({exc.msg}, line {exc.lineno}); nothing was changed"
            ) from None
    state = root / STATE_DIR
    if state.exists() and not state.is_dir():
        raise GateError(f"{state} exists and is not a folder: move it away; nothing was changed")
    if (state / "manifest.json").exists():
        raise GateError(f"{state}/manifest.json exists: a patch is already applied; revert it first")
    for rel in plans:
        path = root / rel
        if not writable(path) or not writable(path.parent):
            raise GateError(f"{rel}: not writable (read-only install?): nothing was changed")
    if not writable(root):
        raise GateError(f"{root}: not writable (read-only install?): nothing was changed")
    for rel, p in plans.items():  # the tree must not have moved since we read it
        if (root / rel).read_bytes() != p.original:
            raise GateError(f"{rel} changed while planning; nothing was changed")
    remove_temps(root, plans)
    manifest = {
        "created": datetime.now(UTC).isoformat(),
        "target": f"sm{aud.target}",
        "versions": aud.versions,
        "status": "applying",
        "files": {
            rel: {"before": sha256_of(root / rel), "after": sha256_bytes(p.result()), "changes": p.notes}
            for rel, p in plans.items()
        },
    }
    for rel, p in plans.items():
        atomic_write_bytes(state / "backup" / rel, p.original)
    atomic_write_json(state / "manifest.json", manifest)
    written: list[str] = []
    try:
        for rel, p in sorted(plans.items()):
            _write_file(root / rel, p.result())
            written.append(rel)
    except BaseException as exc:
        for rel in written:
            atomic_write_bytes(root / rel, plans[rel].original)
        remove_state(state)
        raise GateError(
            f"writing {len(written) + 1}/{len(plans)} files failed ({exc}); "
            f"{len(written)} already written were restored: nothing is applied"
        ) from None
    manifest["status"] = "applied"
    atomic_write_json(state / "manifest.json", manifest)
    return ApplyResult(sorted(plans), diff, notes, state / "manifest.json")


@dataclass
class VerifyReport:
    checks: list[dict]

    @property
    def ok(self) -> bool:
        return all(c["ok"] for c in self.checks)


def evaluate_gate(expression: str, target: int) -> bool:
    """Evaluate an arch ``or`` with every predicate replaced by (its arch == target)."""
    node = ast.parse(expression, mode="eval").body
    if not isinstance(node, ast.BoolOp):
        return False
    return any(arch_of(v) == target for v in node.values)


def verify(root: Path, arch: str = "sm120", known: KnownFiles | None = None) -> VerifyReport:
    """Patched files compile; re-audit (of a whole tree) shows no closed gate; each gate evaluates True for the
    target."""
    aud = audit(root, arch, known)
    checks = []
    manifest_path = root / STATE_DIR / "manifest.json"
    try:
        files = list(json.loads(manifest_path.read_text())["files"]) if manifest_path.is_file() else list(aud.hashes)
    except (ValueError, KeyError, TypeError) as exc:
        raise GateError(
            f"{manifest_path}: unreadable gates manifest ({exc.__class__.__name__}): revert by reinstalling the "
            "package, or restore the file from its backup"
        ) from None
    for rel in files:
        try:
            compile((root / rel).read_bytes(), rel, "exec")
            checks.append({"check": f"{rel} compiles", "ok": True})
        except SyntaxError as exc:
            checks.append({"check": f"{rel} compiles", "ok": False, "detail": f"{exc.msg} line {exc.lineno}"})
        except FileNotFoundError:
            checks.append({"check": f"{rel} compiles", "ok": False, "detail": "the patched file is gone"})
    bindings: dict[str, frozenset[str] | None] = {}  # per file
    for f in aud.findings:
        if f.kind in ("boolean_gate", "raise_guard"):
            ok = evaluate_gate(f.expression, aud.target)
            checks.append({"check": f"{f.file}:{f.line} {f.function}: gate is True on sm{aud.target}", "ok": ok})
            if f.file not in bindings:
                bindings[f.file] = module_bindings(ast.parse((root / f.file).read_bytes()))
            missing = unresolved_names(f.expression, bindings[f.file])
            checks.append(
                {
                    "check": f"{f.file}:{f.line} {f.function}: every name the gate reads is defined",
                    "ok": not missing,
                    "detail": f"line {f.line}: {', '.join(missing)} defined nowhere in {f.file} (a NameError)"
                    if missing
                    else "",
                }
            )
        elif f.role == MULTICAST_ROLE and f.status != "info":
            checks.append(
                {"check": f"{f.file}:{f.line} {f.function}: multicast preflight opened", "ok": f.status == "open"}
            )
        elif f.kind in ("capability_table", "jit_arch_list"):
            checks.append(
                {"check": f"{f.file}:{f.line} {f.function}: admits major {aud.target // 10}", "ok": f.status == "open"}
            )
    closed = [f"{f.file}:{f.function}" for f in aud.closed]
    checks.append({"check": "re-audit shows no closed gate", "ok": not closed, "detail": ", ".join(closed)})
    return VerifyReport(checks)
