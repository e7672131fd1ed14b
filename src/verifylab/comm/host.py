"""What the host shows about GPU-to-GPU paths, read-only: ``nvidia-smi topo -m`` (link per pair, CPU and NUMA
affinity), ``nvidia-smi topo -p2p r|w`` (whether the driver allows peer reads and writes), and the settings that
decide PCIe P2P: IOMMU mode and ACS (kernel command line, sysfs, ``lspci``), the nvidia driver's registry
settings (``/proc/driver/nvidia/params``). Nothing here changes the machine; missing tools give empty facts.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from verifylab.redact import strip_terminal_codes

LINK_MEANING = {
    "X": "self",
    "NV": "NVLink",
    "PIX": "at most one PCIe bridge",
    "PXB": "several PCIe bridges, no host bridge",
    "PHB": "through a PCIe host bridge (the CPU)",
    "NODE": "across host bridges within one NUMA node",
    "SYS": "across the SMP interconnect between NUMA nodes",
}
P2P_STATUS = {
    "OK": "ok",
    "NS": "not supported",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "U": "unknown",
}
IOMMU_FLAGS = ("iommu", "intel_iommu", "amd_iommu", "pcie_acs_override", "pci")


def _run(cmd: list[str], timeout: float = 20.0) -> str:
    if shutil.which(cmd[0]) is None:
        return ""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _gpu_rows(text: str) -> list[list[str]]:
    """The ``GPUn`` rows of an nvidia-smi matrix, split on whitespace, colour codes removed."""
    rows = []
    for line in _ANSI.sub("", text).splitlines():
        cells = line.split()
        if cells and re.fullmatch(r"GPU\d+", cells[0]):
            rows.append(cells)
    return rows


@dataclass(frozen=True)
class GpuAffinity:
    gpu: int
    cpu_affinity: str
    numa: str


def parse_topology(text: str) -> tuple[dict[tuple[int, int], str], list[GpuAffinity]]:
    """``nvidia-smi topo -m`` -> link per ordered GPU pair (``NV18``, ``PIX``, ``SYS``, ...) and each GPU's CPU
    and NUMA affinity. Columns after the GPU ones (NICs, affinities) are told apart by the header."""
    clean = _ANSI.sub("", text)
    header = next((line.split() for line in clean.splitlines() if line.strip().startswith("GPU0")), [])
    gpu_columns = [h for h in header if re.fullmatch(r"GPU\d+", h)]
    n = len(gpu_columns)
    links: dict[tuple[int, int], str] = {}
    affinity = []
    for cells in _gpu_rows(text):
        if len(cells) < n + 1 or cells[0] in header[:0]:
            continue
        src = int(cells[0][3:])
        if cells[1:2] and not re.fullmatch(r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC", cells[1]):
            continue  # a legend or the p2p matrix, not the link matrix
        for j, cell in enumerate(cells[1 : n + 1]):
            dst = int(gpu_columns[j][3:])
            if src != dst:
                links[(src, dst)] = cell
        rest = cells[n + 1 :]
        rest = [c for c in rest if not re.fullmatch(r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC", c)]
        affinity.append(GpuAffinity(src, rest[0] if rest else "", rest[1] if len(rest) > 1 else ""))
    return links, affinity


def parse_p2p_status(text: str) -> dict[tuple[int, int], str]:
    """``nvidia-smi topo -p2p r`` (or ``w``) -> status per ordered GPU pair (``OK``, ``NS``, ``CNS``, ...)."""
    status: dict[tuple[int, int], str] = {}
    for cells in _gpu_rows(text):
        src = int(cells[0][3:])
        for dst, cell in enumerate(cells[1:]):
            if cell != "X" and cell in P2P_STATUS:
                status[(src, dst)] = cell
    return status


def link_meaning(link: str) -> str:
    return LINK_MEANING["NV"] if link.startswith("NV") else LINK_MEANING.get(link, link)


@dataclass
class HostP2P:
    """The host's P2P-relevant facts, each with where it was read."""

    topology: str = ""
    p2p_read: str = ""
    p2p_write: str = ""
    bus_ids: dict[int, str] = field(default_factory=dict)
    settings: list[dict[str, str]] = field(default_factory=list)

    def add(self, name: str, value: str, source: str, meaning: str = "") -> None:
        self.settings.append({"setting": name, "value": value, "source": source, "meaning": meaning})


def _kernel_flags(cmdline: str) -> list[tuple[str, str]]:
    found = []
    for token in cmdline.split():
        key = token.split("=", 1)[0]
        if key in IOMMU_FLAGS or key.startswith(IOMMU_FLAGS):
            found.append((key, token.split("=", 1)[1] if "=" in token else "(set)"))
    return found


def _bridges(bdf_path: Path) -> list[str]:
    """The PCI functions between the root and this device (its upstream bridges), from the sysfs path."""
    return [p for p in bdf_path.resolve().parts if re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d", p)][:-1]


def _acs_control(bdf: str) -> str:
    text = _run(["lspci", "-vvv", "-s", bdf])
    match = re.search(r"ACSCtl:\s*(.+)", text)
    return match.group(1).strip() if match else ""


def read_host_p2p(gpus: list[int], root: Path = Path("/")) -> HostP2P:
    """Collect the facts (``root`` lets tests point at a fake ``/proc`` and ``/sys``)."""
    host = HostP2P(
        topology=strip_terminal_codes(_run(["nvidia-smi", "topo", "-m"])).strip(),
        p2p_read=strip_terminal_codes(_run(["nvidia-smi", "topo", "-p2p", "r"])).strip(),
        p2p_write=strip_terminal_codes(_run(["nvidia-smi", "topo", "-p2p", "w"])).strip(),
    )
    for line in _run(["nvidia-smi", "--query-gpu=index,pci.bus_id", "--format=csv,noheader"]).splitlines():
        index, _, bus = line.partition(",")
        if index.strip().isdigit() and int(index) in gpus:
            host.bus_ids[int(index)] = bus.strip()
    cmdline = _read(root / "proc/cmdline")
    flags = _kernel_flags(cmdline)
    for key, value in flags:
        host.add(key, value, "/proc/cmdline", "kernel parameter that decides IOMMU/ACS behaviour")
    if cmdline and not flags:
        host.add("iommu flags", "none", "/proc/cmdline", "IOMMU left at the kernel's and firmware's default")
    iommu_class = root / "sys/class/iommu"
    units = sorted(p.name for p in iommu_class.iterdir()) if iommu_class.is_dir() else []
    host.add("iommu units", ", ".join(units) or "none", "/sys/class/iommu", "an active IOMMU remaps DMA")
    for gpu, bus in sorted(host.bus_ids.items()):
        bdf = _sysfs_bdf(bus)
        device = root / "sys/bus/pci/devices" / bdf
        if not device.exists():
            continue
        group_type = _read(device / "iommu_group/type").strip()
        if group_type:
            host.add(
                f"GPU{gpu} iommu domain",
                group_type,
                f"{device}/iommu_group/type",
                "identity = passthrough (P2P direct); DMA/DMA-FQ = translated (P2P may be redirected)",
            )
        numa = _read(device / "numa_node").strip()
        if numa:
            host.add(f"GPU{gpu} numa node", numa, f"{device}/numa_node")
        for bridge in _bridges(device):
            acs = _acs_control(bridge)
            if acs:
                host.add(
                    f"GPU{gpu} bridge {bridge} ACSCtl",
                    acs,
                    f"lspci -vvv -s {bridge}",
                    "SrcValid/ReqRedir/CmpltRedir '+' send peer traffic up to the root complex",
                )
    params = _read(root / "proc/driver/nvidia/params")
    for line in params.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in {"RegistryDwords", "RegistryDwordsPerDevice", "EnableResizableBar"}:
            host.add(
                name.strip(),
                value.strip().strip('"') or "(empty)",
                "/proc/driver/nvidia/params",
                "nvidia driver settings (ForceP2P and friends live in RegistryDwords)",
            )
    return host


def _sysfs_bdf(bus_id: str) -> str:
    """nvidia-smi's ``00000000:18:00.0`` -> sysfs's ``0000:18:00.0``."""
    domain, _, rest = bus_id.lower().partition(":")
    return f"{domain[-4:]}:{rest}" if rest else bus_id.lower()


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
