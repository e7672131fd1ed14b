"""A test double's PyTorch profiler trace, as the stand-in server writes it when asked to profile: a known number of
steps, all-reduces and GEMMs per layer, NCCL's or FlashInfer's fused kernel (a test double: never data)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
FUSED_KERNEL = (
    "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 2, true>"
    "(flashinfer::trtllm_allreduce_fusion::AllReduceFusionParams<__nv_bfloat16>)"
)


def write_fake_trace(path: Path, steps: int, layers: int = 2, fused: bool = False) -> None:
    """A test-double trace: per step one cudaGraphLaunch, 2 all-reduces and 2 GEMMs per layer. ``fused``: as
    SGLang fuses a Qwen3-MoE layer stack, every all-reduce but the last layer's MLP one is FlashInfer's kernel."""
    events, ts, corr = [], 0.0, 1
    for _ in range(steps):
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaGraphLaunch",
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": 5.0,
                "args": {"correlation": corr},
            }
        )
        for site in range(layers * 2):
            kernel = FUSED_KERNEL if fused and site < layers * 2 - 1 else NCCL_KERNEL
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT",
                    "pid": 0,
                    "tid": 7,
                    "ts": ts + 10,
                    "dur": 20.0,
                    "args": {"correlation": corr},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "pid": 0,
                    "tid": 7,
                    "ts": ts + 35,
                    "dur": 15.0,
                    "name": kernel,
                    "args": {"correlation": corr},
                }
            )
            ts += 50
        corr += 1
        ts += 100
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        json.dump({"schemaVersion": 1, "traceEvents": events}, fh)
