"""Preflight of a GPU box for all-reduce fusion: arch, nvcc targets, FlashInfer/CUDA versions, P2P, multicast."""

from __future__ import annotations

import re
import shutil
import subprocess

import pandas as pd

from verifylab.host import HostInfo, capture_host
from verifylab.vocab import FLASHINFER_JIT_ADMITS_SM12X, version_at_least


def _nvcc_archs() -> list[str]:
    if shutil.which("nvcc") is None:
        return []
    try:
        command = ["nvcc", "--list-gpu-arch"]
        out = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60).stdout
    except subprocess.TimeoutExpired:
        return []  # an nvcc that does not answer in a minute lists nothing: the preflight says so
    return re.findall(r"compute_(\d+)", out)


def _p2p_pairs() -> tuple[int, int] | None:
    """(pairs with peer access, pairs in total), or None without torch/CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    n = torch.cuda.device_count()
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    return sum(torch.cuda.can_device_access_peer(a, b) for a, b in pairs), len(pairs)


def box_preflight(host: HostInfo | None = None, arch: int = 120) -> pd.DataFrame:
    """One row per check with its result and what to do when it fails."""
    host = host or capture_host()
    rows = []
    cc = host.compute_capability or ""
    gpu_arch = int(cc.replace(".", "")) if cc else None
    rows.append(
        {
            "check": "GPU architecture",
            "result": f"{host.gpu_name} (sm{gpu_arch})" if gpu_arch else "no GPU",
            "ok": gpu_arch is not None,
            "action": "" if gpu_arch else "run on the GPU box",
        }
    )
    archs = _nvcc_archs()
    has = str(arch) in archs
    rows.append(
        {
            "check": f"nvcc can target compute_{arch}",
            "result": ", ".join(archs[-6:]) or "nvcc not found",
            "ok": has,
            "action": "" if has else "install a CUDA toolkit whose nvcc lists this arch (12.8+ for sm_120)",
        }
    )
    fi = host.versions.get("flashinfer")
    fi_ok = version_at_least(fi, FLASHINFER_JIT_ADMITS_SM12X)
    rows.append(
        {
            "check": "FlashInfer version",
            "result": fi or "not installed",
            "ok": fi_ok,
            "action": ""
            if fi_ok
            else "0.6.17+ supports SM12x all-reduce fusion; older needs the JIT gate opened "
            "(verifylab gates apply) and is experimental",
        }
    )
    rows.append({"check": "CUDA", "result": host.cuda or "unknown", "ok": host.cuda is not None, "action": ""})
    p2p = _p2p_pairs()
    rows.append(
        {
            "check": "peer-to-peer access between GPUs",
            "ok": p2p is not None and p2p[0] == p2p[1],
            "result": f"{p2p[0]}/{p2p[1]} GPU pairs" if p2p else "not checked (no torch/CUDA here)",
            "action": "the fused kernels store into peers' memory: enable P2P (BIOS ACS/IOMMU settings)",
        }
    )
    nvlink = host.interconnect == "NVLink"
    rows.append(
        {
            "check": "NVLink multicast (for SGLang's workspace preflight and symmetric memory)",
            "result": host.interconnect or "unknown",
            "ok": nvlink,
            "action": ""
            if nvlink
            else "without multicast SGLang >= 0.5.12 logs 'Skipping allreduce fusion' and "
            "stays on NCCL; symmetric-memory all-reduce switches itself off",
        }
    )
    return pd.DataFrame(rows)
