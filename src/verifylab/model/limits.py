"""Physical floors of a one-token decode step per GPU (weight streaming + every all-reduce at a latency floor),
priced by the one pricer (:mod:`verifylab.model.pricer`) on the case study's model."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from verifylab.model.floors import INT4_BYTES_PER_WEIGHT, RTX_PRO_6000_BLACKWELL_GBS, Layout, floor_box, pass_bytes
from verifylab.model.pricer import Scenario, comm_ms, constant_curve, floor_ms

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
        box = replace(floor_box(Layout.TP, tp, 0, expert_bytes), allreduce_us=constant_curve(allreduce_floor_us))
        for name, (gbs, provenance) in bandwidths.items():
            stream_ms = floor_ms(box, 1, 1, gbs)
            comm = comm_ms(box, box.target, 1, Scenario(gbs, box.gpu.tflops.low, "low"))
            rows.append(
                {
                    "hardware": name,
                    "bandwidth_gbs": gbs,
                    "precision": precision,
                    "weight_gb_per_gpu": weight_bytes / 1e9,
                    "weight_stream_ms": stream_ms,
                    "allreduce_floor_ms": comm,
                    "step_floor_ms": stream_ms + comm,
                    "tokens_per_s_ceiling": 1e3 / (stream_ms + comm),
                    "provenance": provenance,
                }
            )
    return pd.DataFrame(rows)
