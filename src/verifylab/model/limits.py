"""Physical floors of a decode step: weight streaming and the all-reduce latency floor.

Hardware numbers are parameters with their source; measured ones come from a run.
"""

from __future__ import annotations

import pandas as pd

from verifylab.shapes import KIMI_K2, ShardShape, weight_bytes_per_layer

RTX_PRO_6000_BLACKWELL_GBS = 1792.0  # NVIDIA datasheet: 96 GB GDDR7, 1792 GB/s (a lead, not measured here)
INT4_BYTES = 0.5 + 1 / 32  # 4-bit weights plus one bf16 scale per 32 (group quantization, assumed)


def decode_weight_bytes_per_gpu(
    tp: int = 8, tokens: int = 1, expert_bytes_per_elem: float = INT4_BYTES, dense_bytes_per_elem: float = 2.0
) -> float:
    """Bytes one GPU must read for one decode step of ``tokens`` tokens (experts at their own precision)."""
    shard = ShardShape(KIMI_K2, tp)
    experts = min(KIMI_K2.experts, KIMI_K2.experts_per_token * tokens)
    bf16_part = weight_bytes_per_layer(shard, 0, bytes_per_elem=dense_bytes_per_elem) - (
        KIMI_K2.shared_experts * shard.expert_weight_elems() * dense_bytes_per_elem
    )
    expert_part = (experts + KIMI_K2.shared_experts) * shard.expert_weight_elems() * expert_bytes_per_elem
    return KIMI_K2.layers * (bf16_part + expert_part)


def limits_table(
    bandwidths: dict[str, tuple[float, str]], allreduce_floor_us: float, allreduces: int = 122, tp: int = 8
) -> pd.DataFrame:
    """Floor of a one-token decode step per GPU for each bandwidth given (name -> (GB/s, provenance))."""
    rows = []
    for precision, expert_bytes in (("INT4 experts, bf16 attention", INT4_BYTES), ("bf16", 2.0)):
        weight_bytes = decode_weight_bytes_per_gpu(tp, 1, expert_bytes)
        for name, (gbs, provenance) in bandwidths.items():
            stream_ms = weight_bytes / (gbs * 1e9) * 1e3
            comm_ms = allreduces * allreduce_floor_us / 1e3
            rows.append(
                {
                    "hardware": name,
                    "bandwidth_gbs": gbs,
                    "precision": precision,
                    "weight_gb_per_gpu": weight_bytes / 1e9,
                    "weight_stream_ms": stream_ms,
                    "allreduce_floor_ms": comm_ms,
                    "step_floor_ms": stream_ms + comm_ms,
                    "tokens_per_s_ceiling": 1e3 / (stream_ms + comm_ms),
                    "provenance": provenance,
                }
            )
    return pd.DataFrame(rows)
