"""Physical floors of a one-token decode step per GPU (weight streaming + every all-reduce at a latency floor),
from the same bytes-read function the options use (:func:`verifylab.model.floors.pass_bytes`)."""

from __future__ import annotations

import pandas as pd

from verifylab.model.floors import INT4_BYTES_PER_WEIGHT, RTX_PRO_6000_BLACKWELL_GBS, Layout, pass_bytes

INT4_BYTES = INT4_BYTES_PER_WEIGHT  # 4-bit weights plus one bf16 scale per 32 (see floors)
__all__ = ["INT4_BYTES", "RTX_PRO_6000_BLACKWELL_GBS", "decode_weight_bytes_per_gpu", "limits_table"]


def decode_weight_bytes_per_gpu(tp: int = 8, tokens: int = 1, expert_bytes_per_elem: float = INT4_BYTES) -> float:
    """Bytes one GPU must read for one decode step of ``tokens`` tokens (experts at their own precision)."""
    return pass_bytes(tokens, Layout.TP, tp, expert_bytes_per_weight=expert_bytes_per_elem).total


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
