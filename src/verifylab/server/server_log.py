"""Reading a server's log: why a start-up failed (signature and advice, the last error line), what is in
effect (fusion enabled / skipped, speculation, TP size, the multicast guard), and what it is doing now."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from verifylab.redact import redact_text
from verifylab.server.variants import Variant

FAILURE_SIGNATURES = [
    (
        "sm120_jit_gate",
        r"No supported CUDA architectures found for major versions",
        "FlashInfer's JIT arch list excludes this GPU: open it (verifylab gates apply) or use FlashInfer >= 0.6.17",
    ),
    ("cuda_oom", r"CUDA out of memory|OutOfMemoryError", "lower --mem-fraction-static or the model/batch size"),
    (
        "nccl_error",
        r"NCCL error|ncclUnhandledCudaError|ncclSystemError|NCCL WARN",
        "NCCL failed: check P2P/topology, NCCL_DEBUG=INFO",
    ),
    ("unknown_argument", r"unrecognized arguments?|error: argument", "a flag this SGLang version does not know"),
    (
        "fusion_resolve",
        r"FlashInfer allreduce fusion requires SM90 or SM10X",
        "the fusion backend guard rejects this arch: verifylab gates apply",
    ),
    ("port_in_use", r"address already in use|Errno 98", "another process holds the port"),
    (
        "missing_package",
        r'requires "([\w.\-]+)" to be installed',
        "SGLang needs the Python package '{0}' at run time: install it beside SGLang",
    ),
    ("import_error", r"No module named '([\w.]+)'", "a Python dependency is missing: no module named '{0}'"),
    ("import_error", r"ModuleNotFoundError|ImportError", "a Python dependency is missing"),
]
_ERROR_LINE = re.compile(r"^\s*[\w.]+(?:Error|Exception)\b.*$", re.MULTILINE)
# Fusion *in effect*, from SGLang's log (0.5.11+: flashinfer_comm_fusion.py). Checked in this order: a skip or a
# failed workspace wins over an earlier success. "Auto-enabling ..." only says fusion was *requested*.
FUSION_LOG = [
    ("skipped", r"Skipping allreduce fusion|Disabling flashinfer allreduce fusion permanently"),
    ("enabled", r"AllReduce Fusion enabled and workspace initialized"),
]
# SGLang's PCIe-IPC all-reduce *in effect*, from its log (0.5.21+: pcie_ipc_ar.py): it is opt-in, and a FlashInfer
# without the kernel, a workspace that fails or deterministic inference leave NCCL running (a fallback wins).
PCIE_IPC_LOG = [
    (
        "fell back",
        r"falling back to NCCL all-reduce|PCIe-IPC workspace \(max_numel=\d+\) failed|leaving PCIe-IPC all-reduce off",
    ),
    ("enabled", r"PCIe-IPC all-reduce enabled"),
]
GUARD_LOG = "verifylab multicast guard loaded"


# Lines SGLang logs for problems it deliberately ignores (optional model modules whose imports fail).
_IGNORED_LINE = re.compile(r"^.*Ignore import error when loading.*$\n?", re.MULTILINE)


def classify_failure(log_text: str) -> tuple[str, str]:
    """(signature, what to do) for a server log; ('unknown', ...) when nothing matches. Errors SGLang says it
    ignores are skipped, and the last occurrence counts (the one that stopped the server)."""
    text = _IGNORED_LINE.sub("", log_text)
    for name, pattern, advice in FAILURE_SIGNATURES:
        matches = list(re.finditer(pattern, text))
        if matches:
            return name, advice.format(*matches[-1].groups())
    return "unknown", "read the server log"


def last_error_line(log_text: str) -> str | None:
    """The last ``SomethingError: ...`` line of a log: usually what killed the server."""
    lines = _ERROR_LINE.findall(log_text)
    return lines[-1].strip()[:300] if lines else None


@dataclass
class EffectiveState:
    """What the running server actually does, not what was asked."""

    variant: str
    server_args: dict
    fusion: str  # enabled / skipped / off / unknown
    speculative_algorithm: str | None
    tp_size: int
    active: bool
    inactive_reasons: list[str] = field(default_factory=list)
    multicast_guard: bool = False  # the server's processes loaded verifylab's sitecustomize guard
    pcie_ipc: str = "off"  # SGLang's PCIe-IPC all-reduce: enabled / fell back / unverified / off

    def as_row(self) -> dict:
        """The columns a ``variant_state`` / ``profile_state`` table stores for a server that started."""
        return {
            "fusion": self.fusion,
            "speculative_algorithm": self.speculative_algorithm,
            "tp_size": self.tp_size,
            "active": self.active,
            "inactive_reasons": "; ".join(self.inactive_reasons),
            "multicast_guard": self.multicast_guard,
            "pcie_ipc": self.pcie_ipc,
            "failure": "",
        }


def fusion_in_effect(log_text: str) -> str | None:
    """'skipped' or 'enabled' as SGLang's log says (a skip wins), or None when the log says neither."""
    for state, pattern in FUSION_LOG:
        if re.search(pattern, log_text, re.IGNORECASE):
            return state
    return None


def pcie_ipc_in_effect(log_text: str) -> str | None:
    """'fell back' or 'enabled' as SGLang's log says of its PCIe-IPC all-reduce (a fallback wins), or None."""
    for state, pattern in PCIE_IPC_LOG:
        if re.search(pattern, log_text, re.IGNORECASE):
            return state
    return None


def effective_state(variant: Variant, server_info: dict, log_text: str) -> EffectiveState:
    """Decide whether the variant's mechanism can act, from /server_info and the log."""
    args = server_info.get("server_args", server_info)
    tp = int(args.get("tp_size") or 1)
    logged = fusion_in_effect(log_text)
    if "flashinfer_allreduce_fusion" in args:  # resolved by SGLang (0.5.17: False at TP 1 whatever was asked)
        requested = bool(args["flashinfer_allreduce_fusion"])
    else:
        requested = bool(
            args.get("enable_flashinfer_allreduce_fusion") or args.get("flashinfer_allreduce_fusion_backend")
        )
    if args.get("enforce_disable_flashinfer_allreduce_fusion"):
        requested = False
    # the server args keep the backend set even when fusion was skipped: only the log says what is in effect
    fusion = logged or ("unverified" if requested and tp > 1 else "off")
    spec = args.get("speculative_algorithm")
    reasons = []
    if variant.fusion:
        if tp == 1:
            reasons.append("TP 1: there is no all-reduce to fuse")
        elif fusion == "skipped":
            reasons.append("SGLang skipped fusion (workspace preflight or workspace creation failed; log says why)")
        elif fusion == "unverified":
            reasons.append("requested, but SGLang logged no initialized fusion workspace: not shown to be in effect")
        elif fusion == "off":
            reasons.append("fusion not enabled in the running server")
    elif fusion == "enabled" and tp > 1:
        reasons.append("baseline is fused (auto-enabled): not a fusion-off baseline")
    if variant.speculative and not spec:
        reasons.append("speculation is off in the running server")
    ipc = (pcie_ipc_in_effect(log_text) or "unverified") if variant.pcie_ipc and tp > 1 else "off"
    if variant.pcie_ipc and ipc != "enabled":
        reasons.append(
            "TP 1: there is no all-reduce for PCIe-IPC"
            if tp == 1
            else f"SGLang's PCIe-IPC all-reduce was asked for and is not in effect ({ipc}: the log says why)"
        )
    return EffectiveState(
        variant.name,
        args,
        fusion,
        spec,
        tp,
        active=not reasons,
        inactive_reasons=reasons,
        multicast_guard=GUARD_LOG in log_text,
        pcie_ipc=ipc,
    )


def last_log_line(path: Path | None, tail_bytes: int = 4096) -> str:
    """The last non-empty line of a log being written (what a start-up is doing now), or ''."""
    if path is None or not path.exists():
        return ""
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - tail_bytes))
        lines = fh.read().decode("utf-8", errors="replace").strip().splitlines()
    return redact_text(lines[-1].strip()) if lines else ""
