"""Find the gates in an installed SGLang (and FlashInfer): the root, the versions, every gate with its
status for a target architecture. Writes nothing."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

from verifylab.errors import GateError
from verifylab.gates.scan import PCIE_IPC_ROLE, Finding, scan_file
from verifylab.gates.source import MULTICAST_ROLE, source_bindings, unresolved_names
from verifylab.gates.state import STATE_DIR
from verifylab.gates.state import TreeState as TreeState
from verifylab.gates.state import revert as revert
from verifylab.gates.state import tree_state as tree_state
from verifylab.gates.tree import KnownFiles, check_tree
from verifylab.iorw import sha256_of
from verifylab.vocab import FLASHINFER_JIT_ADMITS_SM12X, flashinfer_workspace_needs_multicast, version_at_least

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


def audit(root: Path, arch: str = "sm120", known: KnownFiles | None = None) -> Audit:
    """Find every gate, table, limit and precondition in a whole tree (``gates.tree``: with ``known``, the files
    the audited matrix lists for the installed versions must be there); nothing is written."""
    target = parse_arch(arch)
    present = check_root(root)
    check_tree(root, present, {p: package_version(root, p) for p in present}, known or {})
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
                _mark_unresolved(found, path)
                findings.extend(found)
                hashes[rel] = sha256_of(path)
    versions = {p: package_version(root, p) for p in present}
    findings.extend(_version_preconditions(versions, target))
    _judge_multicast_preflight(findings, versions.get("flashinfer") or package_version(root, "flashinfer"))
    _judge_pcie_ipc(findings, root)
    return Audit(root, target, findings, hashes, versions)


def _judge_pcie_ipc(findings: list[Finding], root: Path) -> None:
    """SGLang's PCIe-IPC path is open where the FlashInfer beside it has ``pcie_ipc_comm``, closed where it does not
    (SGLang then warns and stays on NCCL); left as found where no FlashInfer is in the tree."""
    flashinfer = root / "flashinfer"
    for f in findings:
        if f.role != PCIE_IPC_ROLE or not flashinfer.is_dir():
            continue
        has = (flashinfer / "comm" / "pcie_ipc_ar.py").is_file()
        f.status = "open" if has else "closed"
        f.note += (
            "; this FlashInfer has it" if has else "; this FlashInfer has none: SGLang falls back to NCCL (upgrade it)"
        )


def _mark_unresolved(found: list[Finding], path: Path) -> None:
    """An open gate that reads a name its module defines nowhere (a hand edit such as the case study's
    ``or _is_sm120_supported`` on 0.5.9) raises NameError when it runs: its note says so, with the names."""
    gates = [f for f in found if f.kind in ("boolean_gate", "raise_guard") and f.status == "open"]
    if not gates:
        return
    bindings = source_bindings(path.read_bytes())
    for f in gates:
        missing = unresolved_names(f.expression, bindings)
        if missing:
            broken = f"BROKEN: {', '.join(missing)} defined nowhere in this module (NameError when it runs)"
            f.note = f"{broken}; {f.note}" if f.note else broken


def _judge_multicast_preflight(findings: list[Finding], flashinfer: str | None) -> None:
    """The preflight may be opened only where the installed FlashInfer allocates its TRT-LLM workspace without
    NVLink multicast (all audited versions but 0.6.11-0.6.12); otherwise opening it would only move the failure
    into the workspace."""
    for f in findings:
        if f.role != MULTICAST_ROLE or f.status != "closed":
            continue
        if flashinfer is None:
            f.status = "info"
            f.note += (
                "; no FlashInfer in this tree: cannot tell whether its TRT-LLM workspace needs multicast, "
                "so the preflight is left alone (audit the site-packages that hold both)"
            )
        elif flashinfer_workspace_needs_multicast(flashinfer):
            f.status = "info"
            f.note += (
                f"; FlashInfer {flashinfer}'s TRT-LLM workspace needs NVLink multicast: fusion cannot run "
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
