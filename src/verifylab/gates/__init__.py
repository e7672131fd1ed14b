"""Audit, apply, verify and revert the architecture gates that keep FlashInfer all-reduce fusion (and
symmetric-memory all-reduce) off for an architecture, in an installed SGLang (and FlashInfer), any version.

``root`` is a folder holding the ``sglang/`` package (site-packages or an unpacked wheel), optionally
``flashinfer/`` too. Nothing is written by ``audit`` or ``verify``; ``apply`` changes all files or none and
keeps backups and hashes in ``root/.verifylab-gates/`` so that ``revert`` restores them byte for byte.
Finding lives in ``inventory``, opening and checking in ``opening``, the journal and revert in ``state``. The verify
path's gates (which attention backend and verify kernel run) are read by ``verify_path``, the default backend by
``default_backend``, both on ``verify_gate``'s rows.
"""

from verifylab.errors import GateError
from verifylab.gates.inventory import (
    PACKAGES,
    Audit,
    audit,
    check_root,
    default_root,
    package_version,
    parse_arch,
)
from verifylab.gates.opening import ApplyResult, VerifyReport, apply, evaluate_gate, plan, unified_diff, verify
from verifylab.gates.state import STATE_DIR, TreeState, revert, tree_state

__all__ = [
    "PACKAGES",
    "STATE_DIR",
    "ApplyResult",
    "Audit",
    "GateError",
    "TreeState",
    "VerifyReport",
    "apply",
    "audit",
    "check_root",
    "default_root",
    "evaluate_gate",
    "package_version",
    "parse_arch",
    "plan",
    "revert",
    "tree_state",
    "unified_diff",
    "verify",
]
