"""Classify device kernels (and CPU-side collectives) into what they do.

A FlashInfer fused all-reduce + RMSNorm kernel is communication *and* norm: it counts as an all-reduce
(Holistic Trace Analysis counts only ``nccl*`` kernels as communication and so sees almost none after
fusion). NCCL kernel-name suffixes such as ``_RING_LL`` are kept as *names*: they do not prove which
algorithm or protocol ran.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

KERNEL_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})


@dataclass(frozen=True, slots=True)
class KernelClass:
    """What one kernel is: ``group`` (allreduce/allgather/collective/norm/gemm_moe/attention/spec_verify/
    memory/other)
    and, for collectives, the implementation and the algorithm/protocol its *name* mentions."""

    group: str
    impl: str | None = None
    name_suffix: str | None = None
    also_norm: bool = False


_NCCL = re.compile(r"^(?:void )?nccl(?:Dev)?Kernel_([A-Za-z]+)", re.I)
_NCCL_ALGO_PROTO = re.compile(r"(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|NVLS_TREE|NVLS|PAT)_(LL128|LL|SIMPLE)", re.I)
_NCCL_ANY = re.compile(r"nccl", re.I)
_FI_FUSED = re.compile(r"allreduce_fusion_kernel_(oneshot|twoshot)\w*|allreduce_fusion", re.I)
_FI_MOE_FUSED = re.compile(r"moe_?allreduce|moereduction_allreduce", re.I)
_CUSTOM_AR = re.compile(r"cross_device_reduce_(1stage|2stage)|custom_?all_?reduce", re.I)
# SGLang's custom all-reduce v2 (0.5.17+, JIT-built from sglang/jit_kernel's custom_all_reduce.cuh), e.g.
# "void (anonymous namespace)::all_reduce_kernel<(anonymous namespace)::AllReducePushImpl<__nv_bfloat16, 2u, true>,
# 2u, 1>(...)": its name says neither "custom" nor "nccl", so a name filter misses it (as it misses fused kernels).
_CUSTOM_AR_V2 = re.compile(r"all_reduce_kernel<[^>]*AllReduce(Push|Pull)Impl", re.I)
_TRTLLM_AR = re.compile(r"(oneShot|twoShot)AllReduce|lamport\w*all_?reduce|allreduce\w*lamport", re.I)
_SYMM_MEM = re.compile(r"multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce|symm_mem", re.I)
_MSCCLPP = re.compile(r"mscclpp", re.I)
_ALLGATHER = re.compile(r"all_?gather", re.I)
_NORM = re.compile(r"rms_?norm|layer_?norm|rmsnorm|layernorm|rsqrt", re.I)
_GEMM = re.compile(
    r"gemm|gemv|cublas|cutlass|xmma|nvjet|matmul|_mm_|splitk|wgmma|fused_moe|moe_align|moe_sum|grouped_|"
    r"sm\d+_xmma|ampere_|hopper_|bmm|dot_kernel",
    re.I,
)
_ATTENTION = re.compile(
    r"flash|fmha|attention|attn|mla|sdpa|BatchDecode|BatchPrefill|decode_kernel|softmax|"
    r"^_fwd_(?:grouped_)?kernel",  # SGLang's Triton attention backend (extend / verify, decode stages)
    re.I,
)
# Speculative decoding's own kernels in SGLang: tree verification and (NGRAM) tree reconstruction.
_SPEC_VERIFY = re.compile(
    r"VerifyTree|verify_tree|TreeSpeculative|tree_speculative|reconstructIndicesFromTreeMask|build_tree", re.I
)


@lru_cache(maxsize=16384)
def classify_kernel(name: str, cat: str = "kernel") -> KernelClass:
    """Classify one device kernel by its name (and category for copies)."""
    if cat in ("gpu_memcpy", "gpu_memset"):
        return KernelClass("memory")
    match = _NCCL.match(name)
    if match or _NCCL_ANY.search(name):
        op = (match.group(1) if match else "").lower()
        algo = _NCCL_ALGO_PROTO.search(name)
        suffix = f"{algo.group(1).upper()}_{algo.group(2).upper()}" if algo else None
        if "allreduce" in op or ("allreduce" in name.lower() and not op):
            return KernelClass("allreduce", "nccl", suffix)
        if "allgather" in op:
            return KernelClass("allgather", "nccl", suffix)
        return KernelClass("collective", "nccl", suffix)
    if _FI_MOE_FUSED.search(name):
        return KernelClass("allreduce", "flashinfer_moe_fused", None, also_norm=True)
    fused = _FI_FUSED.search(name)
    if fused:
        shot = (fused.group(1) or "").lower() or None
        return KernelClass("allreduce", "flashinfer_fused", shot, also_norm=True)
    custom = _CUSTOM_AR.search(name)
    if custom:
        return KernelClass("allreduce", "custom", custom.group(1))
    custom_v2 = _CUSTOM_AR_V2.search(name)
    if custom_v2:
        return KernelClass("allreduce", "custom", f"v2_{custom_v2.group(1).lower()}")
    if _TRTLLM_AR.search(name):
        return KernelClass("allreduce", "trtllm")
    if _SYMM_MEM.search(name):
        return KernelClass("allreduce", "symm_mem")
    if _MSCCLPP.search(name):
        return KernelClass("allreduce" if "reduce" in name.lower() else "collective", "mscclpp")
    if _ALLGATHER.search(name):
        return KernelClass("allgather", "other")
    if _SPEC_VERIFY.search(name):
        return KernelClass("spec_verify")
    if _NORM.search(name):
        return KernelClass("norm")
    if _ATTENTION.search(name):
        return KernelClass("attention")
    if _GEMM.search(name):
        return KernelClass("gemm_moe")
    return KernelClass("other")


# CPU-side collective ops: the c10d op and the backend's own range are the *same* all-reduce.
_CPU_COLLECTIVE = re.compile(
    r"^(?:c10d::(allreduce|allgather|all_gather|reduce_scatter|broadcast|barrier)\w*|"
    r"(gloo|nccl|mpi|ucc):(all_reduce|all_gather|allgather|reduce_scatter|broadcast|barrier|\w+)|"
    r"record_param_comms)$",
    re.I,
)


def classify_cpu_collective(name: str, args: Mapping) -> tuple[str, str] | None:
    """(kind, backend) for a CPU-side collective op, or None. kind is allreduce/allgather/collective."""
    match = _CPU_COLLECTIVE.match(name)
    if not match:
        return None
    if name == "record_param_comms":
        coll = str(args.get("Collective name", "")).lower()
        op, backend = coll, "c10d"
    elif match.group(1):
        op, backend = match.group(1).lower(), "c10d"
    else:
        op, backend = match.group(3).lower(), match.group(2).lower()
    if op.replace("_", "") == "allreduce":
        return "allreduce", backend
    if op.replace("_", "") == "allgather":
        return "allgather", backend
    if op == "barrier":
        return None
    return "collective", backend
