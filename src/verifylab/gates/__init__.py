"""Audit, apply, verify and revert the architecture gates that keep FlashInfer all-reduce fusion (and
symmetric-memory all-reduce) off for an architecture, in an installed SGLang (and FlashInfer), any version.

``root`` is a folder holding the ``sglang/`` package (site-packages or an unpacked wheel), optionally
``flashinfer/`` too. Nothing is written by ``audit`` or ``verify``; ``apply`` changes all files or none and
keeps backups and hashes in ``root/.verifylab-gates/`` so that ``revert`` restores them byte for byte.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import json
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from verifylab.errors import GateError
from verifylab.gates.patch import FilePlan, plan_file
from verifylab.gates.scan import Finding, arch_of, scan_file, sha256_bytes, sha256_of
from verifylab.gates.source import MULTICAST_ROLE
from verifylab.gates.state import STATE_DIR, recover_for_apply, remove_state, remove_temps
from verifylab.gates.state import TreeState as TreeState
from verifylab.gates.state import revert as revert
from verifylab.gates.state import tree_state as tree_state
from verifylab.iorw import atomic_write_bytes, atomic_write_json
from verifylab.vocab import FLASHINFER_JIT_ADMITS_SM12X, FLASHINFER_WORKSPACE_WITHOUT_MULTICAST, version_at_least

PACKAGES = ("sglang", "flashinfer")


def parse_arch(arch: str) -> int:
    """'sm120' / 'SM120' / '120' / '12.0' -> 120."""
    text = arch.lower().removeprefix("sm").removeprefix("_")
    match = re.fullmatch(r"(\d+)(?:\.(\d))?", text)
    if not match:
        raise GateError(f"--arch {arch!r}: expected e.g. sm120, 120 or 12.0")
    return int(match.group(1)) * 10 + int(match.group(2)) if match.group(2) is not None else int(match.group(1))


def default_root() -> Path:
    """The folder holding the ``sglang`` package importable in this interpreter."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise GateError("no 'sglang' importable in this Python: pass --root DIR (a folder holding sglang/)")
    return Path(next(iter(spec.submodule_search_locations))).parent


def check_root(root: Path) -> list[str]:
    """The packages present under ``root``; a clear error when there is no sglang/ (or flashinfer/)."""
    if not root.is_dir():
        raise GateError(f"{root}: no such folder")
    present = [p for p in PACKAGES if (root / p).is_dir()]
    if not present:
        raise GateError(f"{root}: holds neither sglang/ nor flashinfer/ (expected site-packages or an unpacked wheel)")
    return present


def package_version(root: Path, package: str) -> str | None:
    """Version of ``package`` under ``root`` from its dist-info or version module."""
    dist_names = {"sglang": "sglang", "flashinfer": "flashinfer_python"}
    for meta in root.glob(f"{dist_names[package]}-*.dist-info/METADATA"):
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    for candidate in (root / package / "version.py", root / package / "_build_meta.py", root / package / "__init__.py"):
        if candidate.is_file():
            match = re.search(
                r"__version__\s*=\s*[\"']([^\"']+)", candidate.read_text(encoding="utf-8", errors="replace")
            )
            if match:
                return match.group(1)
    return None


@dataclass
class Audit:
    """The findings for one root and target arch, with the hash of every file that has one."""

    root: Path
    target: int
    findings: list[Finding]
    hashes: dict[str, str]
    versions: dict[str, str | None] = field(default_factory=dict)

    @property
    def closed(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "closed"]

    def to_json(self) -> dict:
        return {
            "root": str(self.root),
            "target": f"sm{self.target}",
            "versions": self.versions,
            "findings": [f.to_dict() for f in self.findings],
            "sha256": self.hashes,
        }


def _python_files(root: Path, package: str):
    for path in sorted((root / package).rglob("*.py")):
        if path.is_file() and STATE_DIR not in path.parts:
            yield path


def audit(root: Path, arch: str = "sm120") -> Audit:
    """Find every gate, table, limit and precondition; nothing is written."""
    target = parse_arch(arch)
    present = check_root(root)
    findings: list[Finding] = []
    hashes: dict[str, str] = {}
    for package in present:
        for path in _python_files(root, package):
            rel = path.relative_to(root).as_posix()
            try:
                found = scan_file(path, rel, target)
            except (SyntaxError, UnicodeDecodeError) as exc:
                raise GateError(f"{rel}: not a readable Python source ({exc}); nothing was changed") from None
            if found:
                findings.extend(found)
                hashes[rel] = sha256_of(path)
    versions = {p: package_version(root, p) for p in present}
    findings.extend(_version_preconditions(versions, target))
    _judge_multicast_preflight(findings, versions.get("flashinfer") or package_version(root, "flashinfer"))
    return Audit(root, target, findings, hashes, versions)


def _judge_multicast_preflight(findings: list[Finding], flashinfer: str | None) -> None:
    """The preflight may be opened only where the installed FlashInfer allocates its TRT-LLM workspace without
    NVLink multicast (>= 0.6.15); otherwise opening it would only move the failure into the workspace."""
    for f in findings:
        if f.role != MULTICAST_ROLE or f.status != "closed":
            continue
        if flashinfer is None:
            f.status = "info"
            f.note += (
                "; no FlashInfer in this tree: cannot tell whether its TRT-LLM workspace needs multicast, "
                "so the preflight is left alone (audit the site-packages that hold both)"
            )
        elif not version_at_least(flashinfer, FLASHINFER_WORKSPACE_WITHOUT_MULTICAST):
            f.status = "info"
            f.note += (
                f"; FlashInfer {flashinfer}'s TRT-LLM workspace still needs NVLink multicast: fusion cannot run "
                "without it; FlashInfer >= 0.6.15 allocates the workspace without multicast"
            )
        else:
            f.note += f"; FlashInfer {flashinfer} allocates the TRT-LLM workspace without multicast: apply opens it"


def _version_preconditions(versions: dict[str, str | None], target: int) -> list[Finding]:
    out = []
    fi = versions.get("flashinfer")
    if fi and target >= 120:
        supported = version_at_least(fi, FLASHINFER_JIT_ADMITS_SM12X)
        out.append(
            Finding(
                "flashinfer",
                0,
                "<package>",
                "precondition",
                f"flashinfer {fi}",
                "info",
                "FlashInfer version",
                "SM12x all-reduce fusion is supported upstream (0.6.17+)"
                if supported
                else "experimental: before 0.6.17 SM12x is not supported upstream; the legacy TRT-LLM all-reduce "
                "compiles PDL out for __CUDA_ARCH__ >= 1200; opening the JIT list compiles the fusion kernels for "
                "sm_120a (measured on an H200 machine) but running them is untested: prefer FlashInfer >= 0.6.17",
            )
        )
    if "sglang" in versions:
        out.append(
            Finding(
                "sglang",
                0,
                "<package>",
                "precondition",
                "peer-to-peer access between the GPUs",
                "info",
                "peer-to-peer",
                "the one-shot/two-shot kernels store into peers' buffers: every GPU pair must have P2P "
                "access (check torch.cuda.can_device_access_peer on the box; PCIe switches/IOMMU can forbid it)",
            )
        )
    return out


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
    chunks = []
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
    root: Path, arch: str = "sm120", dry_run: bool = False, expected: dict[str, str] | None = None
) -> ApplyResult:
    """Open the gates: all files or none. ``expected``: sha256 per file from an earlier audit. An interrupted
    earlier apply (or one a reinstall undid) is rolled back first."""
    if not dry_run:
        recover_for_apply(root)
    aud = audit(root, arch)
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


def verify(root: Path, arch: str = "sm120") -> VerifyReport:
    """Patched files compile; re-audit shows no closed gate; each gate evaluates True for the target."""
    aud = audit(root, arch)
    checks = []
    manifest_path = root / STATE_DIR / "manifest.json"
    files = list(json.loads(manifest_path.read_text())["files"]) if manifest_path.is_file() else list(aud.hashes)
    for rel in files:
        try:
            compile((root / rel).read_bytes(), rel, "exec")
            checks.append({"check": f"{rel} compiles", "ok": True})
        except SyntaxError as exc:
            checks.append({"check": f"{rel} compiles", "ok": False, "detail": f"{exc.msg} line {exc.lineno}"})
    for f in aud.findings:
        if f.kind in ("boolean_gate", "raise_guard"):
            ok = evaluate_gate(f.expression, aud.target)
            checks.append({"check": f"{f.file}:{f.line} {f.function}: gate is True on sm{aud.target}", "ok": ok})
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
