"""Every measured run's hardware and software, one row per run: what a reviewer needs to judge or repeat a
measured figure (GPU, count, links, driver, CUDA, NCCL, torch, SGLang, FlashInfer), read from the manifests."""

from __future__ import annotations

import re

import pandas as pd

from verifylab.store.manifest import Manifest
from verifylab.store.runs import RunStore

_LINK = re.compile(r"\b(NV\d+|PIX|PXB|PHB|NODE|SYS)\b")


def gpu_links(topology: str | None) -> str | None:
    """The link kinds between GPUs in an ``nvidia-smi topo -m`` matrix (``NV18``; ``PHB, SYS``), legend left out."""
    if not topology:
        return None
    matrix = topology.split("Legend:")[0]
    rows = [line for line in matrix.splitlines() if re.match(r"\s*(\x1b\[[0-9;]*m)?GPU\d", line)][1:]
    kinds = sorted({m for row in rows for m in _LINK.findall(row)})
    return ", ".join(kinds) or None


def _nccl(manifest: Manifest) -> str | None:
    """NCCL as the run recorded it; else the container's NCCL_VERSION, said to be that (torch may bundle another)."""
    if manifest.versions.nccl:
        return manifest.versions.nccl
    env = manifest.environment.get("NCCL_VERSION")
    return f"{env} (container's NCCL_VERSION)" if env else None


def run_hardware_table(store: RunStore) -> pd.DataFrame:
    """One row per stored run (its id starts with its date): on what hardware and software it was measured,
    each as one phrase so that the run id keeps its width; a fleet campaign's run names its host."""
    rows = []
    for m in store.manifests():
        v = m.versions
        gpus = f"{m.gpu_count} x {m.gpu_name}, SM {m.compute_capability}" if m.gpu_count and m.gpu_name else "CPU only"
        links = gpu_links(m.topology)
        interconnect = f"{m.interconnect} ({links})" if links else m.interconnect
        software = [
            ("CUDA", m.cuda),
            ("NCCL", _nccl(m)),
            ("torch", v.torch),
            ("SGLang", v.sglang),
            ("FlashInfer", v.flashinfer),
        ]
        hardware = f"{gpus}; {interconnect}" if interconnect else gpus
        if m.fleet.get("host"):  # measured by a fleet campaign: the box it ran on, as the campaign names it
            hardware = f"host {m.fleet['host']} ({m.fleet.get('host_description', '')}): {hardware}"
        rows.append(
            {
                "run_id": m.run_id,
                "hardware": hardware,
                "driver": m.driver,
                "software": ", ".join(f"{name} {version}" for name, version in software if version),
                "mechanics_only": m.mechanics_only,
            }
        )
    return pd.DataFrame(rows)
