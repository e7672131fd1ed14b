"""Keeping NVLink multicast off on shared GPU machines: the environment every process must carry, and the
``sitecustomize`` backstop that makes Python callers of ``cuMulticastCreate`` fail (``guard/site/``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent / "site"
NO_MULTICAST_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
SIMULATE_VAR = "VERIFYLAB_SIMULATE_NO_MULTICAST"


def guarded_env(base: Mapping[str, str] | None = None, simulate_no_multicast: bool = False) -> dict[str, str]:
    """``base`` (default: this process's environment) with multicast off and the guard first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    env.update(NO_MULTICAST_ENV)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != SITE_DIR]
    env["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *parts])
    if simulate_no_multicast:
        env[SIMULATE_VAR] = "1"
    else:
        env.pop(SIMULATE_VAR, None)
    return env
