"""The one GPU table: each GPU's names, datasheet bandwidth, matrix rate and memory (public facts), and a GPU as the
pricer sees it (measured ceilings where a run measured them, else the datasheet scaled by what a measured GPU
reached)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from verifylab.errors import ModelInputError
from verifylab.span import Span

RTX_PRO_6000_BLACKWELL_GBS = 1792.0  # NVIDIA datasheet: 96 GB GDDR7, 1792 GB/s (reported)
# What the card reports usable (reported, public): "8x RTX PRO 6000 Blackwell Server Edition (sm_120, 97887 MiB)",
# https://github.com/sgl-project/sglang/issues/37105 (2026-08-31); the datasheet's "96 GB" is a marketing round number
RTX_PRO_6000_MEMORY_BYTES = 97887 * 2**20
UNKNOWN_TFLOPS = Span(250.0, 500.0)  # assumed where no rate is known


@dataclass(frozen=True)
class GpuSheet:
    """One GPU model as the public record has it: its key (``--gpu``), the part of the name NVML reports, its title on
    a page, its datasheet peaks (dense bf16 TFLOP/s None: not in this project's sources), its memory, and a matrix rate
    measured on the card itself and published (used as it is, never scaled)."""

    key: str
    nvml_name: str
    title: str
    bandwidth_gbs: float
    tflops: float | None
    memory_bytes: float
    source: str
    public_tflops: tuple[Span, str] | None = None
    sms: int = 0  # streaming multiprocessors (datasheet / whitepaper): how many programs of a kernel run at once
    arch: str = ""  # the compute capability as SGLang's gates name it (SM90, SM120)


GPU_TABLE: dict[str, GpuSheet] = {
    sheet.key: sheet
    for sheet in (
        GpuSheet(
            "h200", "H200", "H200", 4800.0, 989.0, 141e9,
            "NVIDIA H200 SXM datasheet: 4.8 TB/s, 989 dense bf16 TFLOP/s, 141 GB", sms=132, arch="SM90",
        ),
        GpuSheet(
            "h100", "H100", "H100", 3350.0, 989.0, 80e9,
            "NVIDIA H100 SXM datasheet: 3.35 TB/s, 989 dense bf16 TFLOP/s, 80 GB", sms=132, arch="SM90",
        ),
        GpuSheet(
            "rtx-pro-6000", "RTX PRO 6000", "RTX PRO 6000 Blackwell", RTX_PRO_6000_BLACKWELL_GBS, None,
            RTX_PRO_6000_MEMORY_BYTES,
            "NVIDIA RTX PRO 6000 Blackwell datasheet: 1792 GB/s; 97887 MiB usable as the card reports it",
            (
                Span(368.43, 417.34),
                "reported (public): a bf16 8192^3 torch matmul, '8192x8192: 368.43 TFLOPS' on a Workstation Edition "
                "(https://github.com/zzc0721/torch-performance-test-data/issues/160, 2026-04-04) and '8192x8192: "
                "417.34 TFLOPS' on a Server Edition (same repository, issue 162, 2026-04-09)",
            ),
            sms=188,  # 24,064 CUDA cores at 128 per SM (NVIDIA datasheet)
            arch="SM120",
        ),
    )
}  # fmt: skip


def gpu_title(key: str) -> str:
    """``rtx-pro-6000`` -> ``RTX PRO 6000 Blackwell`` (an unknown key as it is)."""
    sheet = GPU_TABLE.get(key)
    return sheet.title if sheet else key


def gpu_key_in(text: str) -> str | None:
    """The key of the table's GPU that ``text`` names (a run's GPU name or label, ``NVIDIA H200``, ``2xh200-...``), or
    None when it names none."""
    low = text.lower()
    for key, sheet in GPU_TABLE.items():
        if key in low or sheet.nvml_name.lower() in low:
            return key
    return None


def gpu_key_or_name(name: str) -> str:
    """The table's key of the GPU a run's ``name`` names (``NVIDIA H200`` -> ``h200``), or the name itself where it
    names none of the table's."""
    return gpu_key_in(name) or name


def option_key(name: str) -> str:
    """``--gpu`` as the table keys it, whatever its case and separators (``RTX_PRO 6000`` -> ``rtx-pro-6000``)."""
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def gpu_key(name: str) -> str:
    """``NVIDIA H200`` -> ``h200``: the key of a GPU name as NVML or nvidia-smi report it; one line when it names none
    of the table's."""
    key = gpu_key_in(name)
    if key is None:
        known = ", ".join(s.nvml_name for s in GPU_TABLE.values())
        raise ModelInputError(f"GPU {name!r}: not one the model knows ({known}): give --gpu")
    return key


@dataclass(frozen=True)
class Gpu:
    """A GPU as the model sees it: effective bandwidth and matrix rate (ranges where not measured)."""

    name: str
    bandwidth_gbs: Span
    tflops: Span
    memory_bytes: float
    source: str


@dataclass(frozen=True)
class Ceilings:
    """What one GPU reached on a large copy and a large bf16 matrix product (a measured run)."""

    gpu: str
    copy_gbs: float
    matmul_tflops: Span
    source: str


def gpu_named(
    name: str, ceilings: Ceilings | None = None, bandwidth_gbs: float | None = None, tflops: float | None = None
) -> Gpu:
    """A GPU by key (``h200``, ``h100``, ``rtx-pro-6000``): measured ceilings where ``ceilings`` is of this GPU, else
    its datasheet scaled by the fraction of the datasheet that the measured GPU reached; a value given wins."""
    key = option_key(name)
    if key not in GPU_TABLE:
        raise ModelInputError(f"--gpu {name!r}: known GPUs are {', '.join(GPU_TABLE)} (or give --bandwidth-gbs)")
    sheet = GPU_TABLE[key]
    sources = [sheet.source]
    if ceilings is not None and ceilings.gpu == key:
        bw, tf = Span(ceilings.copy_gbs, ceilings.copy_gbs), ceilings.matmul_tflops
        sources.append(f"measured ceilings: {ceilings.source}")
    elif ceilings is not None:
        ref = GPU_TABLE[ceilings.gpu]
        bw_frac = ceilings.copy_gbs / ref.bandwidth_gbs
        bw = Span(sheet.bandwidth_gbs * bw_frac, sheet.bandwidth_gbs * bw_frac)
        if sheet.tflops is not None and ref.tflops is not None:
            low, high = ceilings.matmul_tflops.low, ceilings.matmul_tflops.high
            tf = Span(sheet.tflops * low / ref.tflops, sheet.tflops * high / ref.tflops)
        else:
            tf = UNKNOWN_TFLOPS
        sources.append(f"datasheet x the {ceilings.gpu.upper()}'s measured fraction ({ceilings.source})")
    else:
        bw = Span(sheet.bandwidth_gbs, sheet.bandwidth_gbs)
        tf = Span(sheet.tflops, sheet.tflops) if sheet.tflops is not None else UNKNOWN_TFLOPS
        sources.append("datasheet peaks (never reached: an optimistic bound)")
    if sheet.public_tflops is not None and not (ceilings is not None and ceilings.gpu == key):
        tf, public = sheet.public_tflops
        sources.append(f"matrix rate {public}")
    elif tf == UNKNOWN_TFLOPS:
        sources.append(f"dense bf16 rate assumed {tf.text(0)} TFLOP/s (not in this project's sources)")
    if bandwidth_gbs is not None:
        bw, sources = Span(bandwidth_gbs, bandwidth_gbs), [*sources, f"bandwidth given: {bandwidth_gbs:g} GB/s"]
    if tflops is not None:
        tf, sources = Span(tflops, tflops), [*sources, f"matrix rate given: {tflops:g} TFLOP/s"]
    for what, value in (("bandwidth", bw.low), ("matrix rate", tf.low)):
        if not (math.isfinite(value) and value > 0):
            raise ModelInputError(f"--gpu {name}: {what} {value!r} must be a finite number > 0")
    return Gpu(key, bw, tf, sheet.memory_bytes, "; ".join(sources))
