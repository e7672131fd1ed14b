"""Forensics from the published wheels: for each SGLang version and the FlashInfer it pins, could the all-reduce
fusion run on a PCIe SM120 box? Read from the source, not assumed:

- does FlashInfer's JIT build its TRT-LLM comm module for SM12x (``jit/comm.py``: ``supported_major_versions``
  of ``gen_trtllm_comm_module``);
- does the fused kernel exclude SM12x (``trtllm_allreduce_fusion.cuh`` arch guards), and does the plain TRT-LLM
  all-reduce compile PDL out there (``trtllm_allreduce.cuh``: ``__CUDA_ARCH__ < 1200``);
- how the fusion workspace SGLang creates is allocated: CUDA IPC buffers, or FlashInfer's symmetric device memory,
  with or without NVLink multicast (``trtllm_ar.py``, ``allreduce.py``);
- does SGLang query multicast before creating it (the precondition gate) and does it admit SM120 without gates
  (the audited gate matrix).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from verifylab.gates.matrix import download_wheel
from verifylab.gates.wheel import WheelReader, open_wheel


@dataclass(frozen=True)
class FlashInferFacts:
    version: str
    jit_majors: str  # e.g. "9, 10"
    jit_admits_sm12x: bool
    fused_kernel_excludes_sm12x: bool
    plain_allreduce_pdl_off_sm12x: bool
    legacy_workspace: str  # how trtllm_create_ipc_workspace_for_all_reduce_fusion allocates by default
    unified_workspace: str  # how create_allreduce_fusion_workspace(backend="trtllm") allocates ("" if absent)


def _read(zf: WheelReader, name: str) -> str:
    return zf.read_text(name, missing="")


def _function(source: str, name: str) -> str:
    """The text of top-level function ``name`` (up to the next top-level definition)."""
    match = re.search(rf"^def {name}\(.*?(?=^def |^class |\Z)", source, re.S | re.M)
    return match.group(0) if match else ""


def _symm_multicast(text: str) -> str:
    """How a SymmDeviceMemory call in ``text`` sets multicast (its default is on)."""
    if "SymmDeviceMemory" not in text:
        return ""
    return "no multicast" if re.search(r"enable_multicast\s*=\s*False", text) else "NVLink multicast"


def flashinfer_facts(wheel: Path, version: str) -> FlashInferFacts:
    """Read the facts above from one FlashInfer wheel."""
    with open_wheel(wheel) as zf:
        jit = _read(zf, "flashinfer/jit/comm.py")
        trtllm_ar = _read(zf, "flashinfer/comm/trtllm_ar.py")
        unified = _read(zf, "flashinfer/comm/allreduce.py")
        fused_cuh = _read(zf, "flashinfer/data/include/flashinfer/comm/trtllm_allreduce_fusion.cuh")
        plain_cuh = _read(zf, "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh")
    gen = _function(jit, "gen_trtllm_comm_module")
    majors = re.findall(r"supported_major_versions\s*=\s*\[([^\]]{0,2000})\]", gen)  # bounded: linear
    major_list = [int(m) for m in re.findall(r"\d+", majors[-1])] if majors else []
    legacy = _function(trtllm_ar, "trtllm_create_ipc_workspace_for_all_reduce_fusion")
    default_symm = re.search(r"use_symm_dev_mem\s*:\s*bool\s*=\s*True", legacy) is not None
    legacy_how = (
        f"symmetric device memory ({_symm_multicast(legacy)})" if default_symm else "CUDA IPC buffers (no multicast)"
    )
    unified_how = ""
    trtllm_class = re.search(r"class TRTLLMAllReduceFusionWorkspace.*?(?=^class |\Z)", unified, re.S | re.M)
    if trtllm_class:
        body = trtllm_class.group(0)
        if re.search(r"use_symm_dev_mem\s*=\s*True", body):
            unified_how = f"symmetric device memory ({_symm_multicast(legacy) or 'multicast unknown'})"
        else:
            unified_how = "CUDA IPC buffers (no multicast)"
    return FlashInferFacts(
        version=version,
        jit_majors=", ".join(map(str, major_list)),
        jit_admits_sm12x=12 in major_list,
        fused_kernel_excludes_sm12x=bool(re.search(r"__CUDA_ARCH__\s*<\s*1200", fused_cuh)),
        plain_allreduce_pdl_off_sm12x=bool(re.search(r"__CUDA_ARCH__\s*<\s*1200", plain_cuh)),
        legacy_workspace=legacy_how,
        unified_workspace=unified_how,
    )


def sglang_workspace_api(wheel: Path) -> str:
    """Which FlashInfer call SGLang's fusion uses: the legacy IPC workspace or the unified API."""
    with open_wheel(wheel) as zf:
        source = _read(zf, "sglang/srt/layers/flashinfer_comm_fusion.py")
    if "create_allreduce_fusion_workspace" in source:
        return "unified"
    if "trtllm_create_ipc_workspace_for_all_reduce_fusion" in source:
        return "legacy"
    return "none"


def version_or_none(value: object) -> str | None:
    """A version as a wheel's METADATA pins it (``0.6.4``, ``0.7.1.post2``), or None for a missing pin (None, NaN,
    ``"None"``, anything not a version): never asked of pip as ``flashinfer-python==None``."""
    text = "" if value is None or (isinstance(value, float) and value != value) else str(value).strip()
    return text if re.fullmatch(r"\d+(\.\d+)*([.-]?(post|rc|a|b|dev)\d*)?", text) else None


def fusion_forensics(
    matrix: pd.DataFrame, pins: pd.DataFrame, cache: Path, extra_pairs: list[tuple[str, str]] | None = None
) -> pd.DataFrame:
    """One row per audited SGLang version: its pinned FlashInfer's facts, the workspace SGLang creates, the
    multicast preflight and the arch gates (from the audited matrix), and whether fusion could run on a PCIe SM120
    box with P2P working."""
    rows = []
    pairs = [(str(p.sglang), pin) for p in pins.itertuples() if (pin := version_or_none(p.flashinfer_pin))]
    pairs += list(extra_pairs or [])
    for sglang, fi in pairs:
        facts = flashinfer_facts(download_wheel("flashinfer", fi, cache / "wheels"), fi)
        api = sglang_workspace_api(download_wheel("sglang", sglang, cache / "wheels"))
        found = matrix[(matrix["package"] == "sglang") & (matrix["version"].astype(str) == sglang)]
        arch_gates = int((found["kind"].isin(["boolean_gate", "raise_guard"]) & (found["status"] == "closed")).sum())
        preflight = bool((found["kind"] == "precondition").any())
        workspace = facts.unified_workspace if api == "unified" else facts.legacy_workspace
        blockers = []
        if arch_gates:
            blockers.append(f"{arch_gates} SGLang arch gate(s)")
        if not facts.jit_admits_sm12x:
            blockers.append(f"FlashInfer's JIT list ({facts.jit_majors})")
        if "multicast" in workspace and "no multicast" not in workspace:
            blockers.append("a workspace that needs NVLink multicast")
        if preflight:
            blockers.append("SGLang's multicast preflight")
        rows.append(
            asdict(facts)
            | {
                "sglang": sglang,
                "workspace_api": api,
                "workspace": workspace or "none",
                "multicast_preflight": preflight,
                "sglang_arch_gates_closed": arch_gates,
                "blocks_fusion_on_pcie_sm120": "; ".join(blockers) or "nothing (P2P still needed)",
                "pinned": (pins.loc[pins["sglang"].astype(str) == sglang, "flashinfer_pin"].astype(str) == fi).any(),
                "provenance": f"audited: published sglang {sglang} and flashinfer-python {fi} wheels",
            }
        )
    columns = [
        "sglang",
        "version",
        "pinned",
        "workspace_api",
        "workspace",
        "jit_majors",
        "jit_admits_sm12x",
        "fused_kernel_excludes_sm12x",
        "plain_allreduce_pdl_off_sm12x",
        "multicast_preflight",
        "sglang_arch_gates_closed",
        "blocks_fusion_on_pcie_sm120",
        "provenance",
    ]
    return pd.DataFrame(rows, columns=columns)[columns].rename(columns={"version": "flashinfer"})
