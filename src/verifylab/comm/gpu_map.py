"""Which physical GPU each rank is, and how each pair of them is connected, from NVML (``nvidia-ml-py``) instead of
``nvidia-smi`` text: name, UUID, PCI bus id, NUMA node, PCIe link (generation x width, now and at most), and per
pair NVML's P2P read/write status and the closest common ancestor on the PCI tree. The ranks report CUDA's view
of their device (UUID, bus id); NVML is matched to it by UUID, so CUDA's and NVML's orders may differ. Where NVML
cannot be loaded, CUDA's view and sysfs give what they can and the rows say so."""

from __future__ import annotations

import contextlib
from itertools import permutations
from pathlib import Path
from typing import Any

NVML_PATHS = {  # nvmlGpuTopologyLevel_t -> nvidia-smi topo's names
    0: "same board",
    10: "PIX (one PCIe switch)",
    20: "PXB (several PCIe switches)",
    30: "PHB (through the host bridge)",
    40: "NODE (across host bridges of one NUMA node)",
    50: "SYS (across NUMA nodes / sockets)",
}
NVML_P2P = {
    0: "OK",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported",
    4: "disabled by regkey",
    5: "not supported",
    6: "unknown",
}


def _numa_from_sysfs(bus_id: str, sys_pci: Path = Path("/sys/bus/pci/devices")) -> int | None:
    """The NUMA node the kernel reports for a PCI function (None: unknown, or -1 on a one-node host)."""
    for name in {bus_id.lower(), bus_id.lower()[-12:]}:
        with contextlib.suppress(OSError, ValueError):
            value = int((sys_pci / name / "numa_node").read_text().strip())
            return None if value < 0 else value
    return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_gpu_map(identities: list[dict]) -> tuple[list[dict], list[dict]]:
    """(one row per rank, one row per ordered pair of ranks) for the ranks' reported ``identities``."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no nvidia-ml-py, or no driver library: CUDA's view only
        why = f"NVML not available ({type(exc).__name__}): CUDA's view and sysfs"
        rows = [{**_cuda_row(r, ident), "source": why} for r, ident in enumerate(identities)]
        return rows, []
    try:
        handles = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            handles[_text(pynvml.nvmlDeviceGetUUID(handle)).removeprefix("GPU-")] = (index, handle)
        rows, by_rank = [], {}
        for rank, ident in enumerate(identities):
            uuid = str(ident.get("uuid", "")).removeprefix("GPU-")
            if uuid not in handles:
                rows.append({**_cuda_row(rank, ident), "source": "NVML has no GPU with this UUID: CUDA's view"})
                continue
            index, handle = handles[uuid]
            by_rank[rank] = handle
            rows.append({**_cuda_row(rank, ident), **_nvml_row(pynvml, index, handle), "source": "NVML"})
        pairs = [_nvml_pair(pynvml, a, b, by_rank[a], by_rank[b]) for a, b in permutations(sorted(by_rank), 2)]
        return rows, pairs
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _cuda_row(rank: int, ident: dict) -> dict:
    bus = str(ident.get("pci_bus_id", ""))
    return {
        "rank": rank,
        "cuda_device": ident.get("cuda_device"),
        "name": ident.get("name", ""),
        "uuid": ident.get("uuid", ""),
        "pci_bus_id": bus,
        "numa_node": _numa_from_sysfs(bus) if bus else None,
        "nvml_index": None,
        "pcie_link": "",
        "pcie_link_max": "",
        "nccl_version": ident.get("nccl_version", ""),
    }


def _nvml_row(nvml: Any, index: int, handle: Any) -> dict:
    row: dict[str, Any] = {"nvml_index": index}
    with contextlib.suppress(Exception):
        row["pci_bus_id"] = _text(nvml.nvmlDeviceGetPciInfo(handle).busId).lower()
    with contextlib.suppress(Exception):
        row["name"] = _text(nvml.nvmlDeviceGetName(handle))
    numa = None
    with contextlib.suppress(Exception):
        numa = int(nvml.nvmlDeviceGetNumaNodeId(handle))
    row["numa_node"] = numa if numa is not None and numa >= 0 else _numa_from_sysfs(str(row.get("pci_bus_id", "")))
    with contextlib.suppress(Exception):
        row["pcie_link"] = (
            f"Gen{nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)} x{nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)}"
        )
    with contextlib.suppress(Exception):
        row["pcie_link_max"] = (
            f"Gen{nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)} x{nvml.nvmlDeviceGetMaxPcieLinkWidth(handle)}"
        )
    return row


def _nvml_pair(nvml: Any, a: int, b: int, ha: Any, hb: Any) -> dict:
    row: dict[str, Any] = {"src": a, "dst": b, "nvml_p2p_read": "", "nvml_p2p_write": "", "nvml_path": ""}
    for key, index in (("nvml_p2p_read", "NVML_P2P_CAPS_INDEX_READ"), ("nvml_p2p_write", "NVML_P2P_CAPS_INDEX_WRITE")):
        with contextlib.suppress(Exception):
            status = int(nvml.nvmlDeviceGetP2PStatus(ha, hb, getattr(nvml, index)))
            row[key] = NVML_P2P.get(status, str(status))
    with contextlib.suppress(Exception):
        level = int(nvml.nvmlDeviceGetTopologyCommonAncestor(ha, hb))
        row["nvml_path"] = NVML_PATHS.get(level, str(level))
    return row
