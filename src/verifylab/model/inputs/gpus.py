"""The one GPU table: each GPU's names, datasheet bandwidth, matrix rate and memory, and a GPU as the pricer sees it
(measured ceilings where a run measured them, else the datasheet scaled by what a measured GPU reached)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from verifylab.errors import ModelInputError
from verifylab.span import Span

RTX_PRO_6000_BLACKWELL_GBS = 1792.0  # NVIDIA datasheet: 96 GB GDDR7, 1792 GB/s (reported)


# What the card reports usable (reported, public): "8x RTX PRO 6000 Blackwell Server Edition (sm_120, 97887 MiB)",
# https://github.com/sgl-project/sglang/issues/37105 (2026-08-31); the datasheet's "96 GB" is a marketing round number
RTX_PRO_6000_MEMORY_BYTES = 97887 * 2**20


@dataclass(frozen=True)
class Gpu:
    """A GPU as the model sees it: effective bandwidth and matrix rate (ranges where not measured)."""

    name: str
    bandwidth_gbs: Span
    tflops: Span
    memory_bytes: float
    source: str


# Datasheet figures (public): bandwidth GB/s, dense bf16 TFLOP/s (None: not in this project's sources), memory.
DATASHEETS: dict[str, tuple[float, float | None, float, str]] = {
    "h200": (4800.0, 989.0, 141e9, "NVIDIA H200 SXM datasheet: 4.8 TB/s, 989 dense bf16 TFLOP/s, 141 GB"),
    "h100": (3350.0, 989.0, 80e9, "NVIDIA H100 SXM datasheet: 3.35 TB/s, 989 dense bf16 TFLOP/s, 80 GB"),
    "rtx-pro-6000": (
        RTX_PRO_6000_BLACKWELL_GBS,
        None,
        RTX_PRO_6000_MEMORY_BYTES,
        "NVIDIA RTX PRO 6000 Blackwell datasheet: 1792 GB/s; 97887 MiB usable as the card reports it",
    ),
}


# Matrix rates measured on the card itself and published (reported, public): used as they are, never scaled.
PUBLIC_TFLOPS: dict[str, tuple[Span, str]] = {
    "rtx-pro-6000": (
        Span(368.43, 417.34),
        "reported (public): a bf16 8192^3 torch matmul, '8192x8192: 368.43 TFLOPS' on a Workstation Edition "
        "(https://github.com/zzc0721/torch-performance-test-data/issues/160, 2026-04-04) and '8192x8192: 417.34 "
        "TFLOPS' on a Server Edition (same repository, issue 162, 2026-04-09)",
    )
}


UNKNOWN_TFLOPS = Span(250.0, 500.0)  # assumed where no rate is known


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
    """A GPU by name (``h200``, ``h100``, ``rtx-pro-6000``): measured ceilings where ``ceilings`` is of this GPU, else
    its datasheet scaled by the fraction of the datasheet that the measured GPU reached; a value given wins."""
    key = name.lower().replace("_", "-").replace(" ", "-")
    if key not in DATASHEETS:
        raise ModelInputError(f"--gpu {name!r}: known GPUs are {', '.join(DATASHEETS)} (or give --bandwidth-gbs)")
    sheet_bw, sheet_tf, memory, sheet = DATASHEETS[key]
    sources = [sheet]
    if ceilings is not None and ceilings.gpu == key:
        bw, tf = Span(ceilings.copy_gbs, ceilings.copy_gbs), ceilings.matmul_tflops
        sources.append(f"measured ceilings: {ceilings.source}")
    elif ceilings is not None:
        ref_bw, ref_tf, _, _ = DATASHEETS[ceilings.gpu]
        bw_frac = ceilings.copy_gbs / ref_bw
        bw = Span(sheet_bw * bw_frac, sheet_bw * bw_frac)
        if sheet_tf is not None and ref_tf is not None:
            tf = Span(sheet_tf * ceilings.matmul_tflops.low / ref_tf, sheet_tf * ceilings.matmul_tflops.high / ref_tf)
        else:
            tf = UNKNOWN_TFLOPS
        sources.append(f"datasheet x the {ceilings.gpu.upper()}'s measured fraction ({ceilings.source})")
    else:
        bw = Span(sheet_bw, sheet_bw)
        tf = Span(sheet_tf, sheet_tf) if sheet_tf is not None else UNKNOWN_TFLOPS
        sources.append("datasheet peaks (never reached: an optimistic bound)")
    if key in PUBLIC_TFLOPS and not (ceilings is not None and ceilings.gpu == key):
        tf, public = PUBLIC_TFLOPS[key]
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
    return Gpu(key, bw, tf, memory, "; ".join(sources))


GPU_KEYS = {"H200": "h200", "H100": "h100", "RTX PRO 6000": "rtx-pro-6000"}  # a name NVML reports -> DATASHEETS


def gpu_key(name: str) -> str:
    """``NVIDIA H200`` -> ``h200``: the datasheet key of a GPU name as NVML or nvidia-smi report it."""
    for part, key in GPU_KEYS.items():
        if part.lower() in name.lower():
            return key
    raise ModelInputError(f"GPU {name!r}: not one the model knows ({', '.join(GPU_KEYS)}): give --gpu")


def _gpu_key(text: str) -> str | None:
    low = text.lower()
    for key in ("h200", "h100"):
        if key in low:
            return key
    return None


GPU_TITLE = {"h100": "H100", "h200": "H200", "rtx-pro-6000": "RTX PRO 6000 Blackwell"}
