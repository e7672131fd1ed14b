"""Capture of the host a run is made on: GPUs, architecture, topology, driver, CUDA, versions.

Everything here is best effort and never raises for a missing tool: a machine without a GPU says so.
Of the environment only the names that matter to a measurement are kept, by the package's one secret policy
(``verifylab.redact.measurement_environment``).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, Field

from verifylab import source_tree_version
from verifylab.redact import measurement_environment, strip_terminal_codes

PACKAGES = {
    "torch": "torch",
    "sglang": "sglang",
    "flashinfer": "flashinfer-python",
    "sgl_kernel": "sgl-kernel",
    "sglang_kernel": "sglang-kernel",
    "verifylab": "verifylab",
}


class HostInfo(BaseModel):
    """What a run manifest records about the machine it ran on."""

    host: str
    os: str
    python: str
    gpu_name: str | None = None
    compute_capability: str | None = None
    gpu_count: int = 0
    interconnect: str | None = None
    topology: str | None = None
    driver: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    versions: dict[str, str | None] = Field(default_factory=dict)
    git_commit: str | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


def _run(cmd: list[str], timeout: float = 20.0) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages that decide the results (None when absent)."""
    found: dict[str, str | None] = {}
    for key, dist in PACKAGES.items():
        try:
            found[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[key] = None
    if found.get("verifylab") is None:  # run from a source tree (the device copy): its declared version
        found["verifylab"] = source_tree_version()
    return found


def interconnect_from_topology(topo: str) -> str:
    """Summarize `nvidia-smi topo -m`: NVLink if any GPU pair shows NV#, PCIe otherwise."""
    gpu_rows = [line for line in topo.splitlines() if re.match(r"^GPU\d+\s", line)]
    cells = [cell for row in gpu_rows for cell in row.split()[1:]]
    if any(re.fullmatch(r"NV\d+", cell) for cell in cells):
        return "NVLink"
    if any(cell in {"PIX", "PXB", "PHB", "NODE", "SYS"} for cell in cells):
        return "PCIe"
    return "single GPU" if len(gpu_rows) == 1 else "unknown"


def _query_gpus(info: HostInfo) -> None:
    out = _run(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"])
    if not out:
        info.notes.append("no NVIDIA GPU visible (nvidia-smi absent or failing)")
        return
    rows = [[c.strip() for c in line.split(",")] for line in out.strip().splitlines() if line.strip()]
    info.gpu_count = len(rows)
    if rows:
        info.gpu_name, info.compute_capability, info.driver = rows[0][0], rows[0][1], rows[0][2]
        if len({r[0] for r in rows}) > 1:
            info.notes.append("mixed GPU models: " + "; ".join(r[0] for r in rows))
    topo = _run(["nvidia-smi", "topo", "-m"])
    if topo:
        topo = strip_terminal_codes(topo)
        info.topology = topo.strip()
        info.interconnect = interconnect_from_topology(topo)


def _cuda_version() -> str | None:
    out = _run(["nvcc", "--version"])
    if out:
        match = re.search(r"release (\d+\.\d+)", out)
        if match:
            return match.group(1)
    return None


def _torch_facts(info: HostInfo) -> None:
    if info.versions.get("torch") is None:
        return
    try:
        import torch
    except Exception as exc:  # a broken torch must not break `verifylab env`
        info.notes.append(f"torch import failed: {exc}")
        return
    info.cuda = info.cuda or torch.version.cuda
    if torch.cuda.is_available():
        try:
            info.nccl = ".".join(str(p) for p in torch.cuda.nccl.version())
        except Exception:  # NCCL missing from this build
            info.nccl = None
        if info.compute_capability is None:
            major, minor = torch.cuda.get_device_capability(0)
            info.compute_capability = f"{major}.{minor}"
            info.gpu_name = torch.cuda.get_device_name(0)
            info.gpu_count = torch.cuda.device_count()


def git_commit(root: Path | None = None) -> str | None:
    """The project's current commit (with '-dirty' when the tree has changes), or None outside git."""
    where = str(root or Path.cwd())
    head = _run(["git", "-C", where, "rev-parse", "HEAD"])
    if not head:
        return None
    dirty = _run(["git", "-C", where, "status", "--porcelain", "--untracked-files=no"])
    return head.strip() + ("-dirty" if dirty else "")


def capture_host(root: Path | None = None, with_torch: bool = True) -> HostInfo:
    """Describe this machine for a run manifest. Never raises for missing tools."""
    info = HostInfo(
        host=socket.gethostname(),
        os=f"{platform.system()} {platform.release()}",
        python=platform.python_version(),
        versions=package_versions(),
        environment=measurement_environment(os.environ),
        git_commit=git_commit(root),
    )
    _query_gpus(info)
    info.cuda = _cuda_version()
    if with_torch:
        _torch_facts(info)
    if info.gpu_count == 0 and info.interconnect is None:
        info.interconnect = "none (no GPU)"
    return info
