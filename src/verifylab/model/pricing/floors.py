"""Physical floors of a verify pass: the bytes the busiest GPU must read, at the card's peak bandwidth.

One function, :func:`pass_bytes`, gives every layout's bytes per pass; the limits table and every option use it,
and no modelled compute term may fall below it. Assumptions, stated once:

- precision (Kimi-K2.5 "INT4", the case study's model): routed experts are weight-only INT4 with one bf16
  scale per group of 32 weights (K2-Thinking's native W4A16 format, "quant scale of 1x32"; the K2.5 release's
  ``config.json`` was not read here); attention, router, shared expert, the dense first layer, embeddings
  and the LM head stay bf16;
- routing is uniform top-8 of 384 experts, so a pass of T tokens reads E(T) = 384 (1 - (1 - 8/384)^T)
  distinct experts per layer, and with experts placed whole on GPUs (EP) the busiest GPU holds the
  expected maximum of 8 binomial draws;
- KV cache: MLA's latent (512 + 64 values, bf16) per token and layer. Tensor-parallel attention keeps every
  request's latent KV on every GPU; data-parallel attention keeps a request's KV on its GPU only;
- bandwidth: the RTX PRO 6000 Blackwell's 1792 GB/s (NVIDIA datasheet, reported), never reached in practice.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from verifylab.model.inputs.configs import kimi_k25_costs
from verifylab.model.inputs.gpus import RTX_PRO_6000_BLACKWELL_GBS, gpu_named
from verifylab.model.inputs.model_costs import Layout, PassBytes
from verifylab.model.pricing.pricer import Box, Scenario, constant_curve, floor_ms, price_pass
from verifylab.shapes import KIMI_K2, ModelShape, ShardShape
from verifylab.vocab import BF16_BYTES

INT4_GROUP = 32


INT4_BYTES_PER_WEIGHT = 0.5 + BF16_BYTES / INT4_GROUP  # 4 bits + one bf16 scale per 32 weights


MLA_KV_BYTES_PER_TOKEN_LAYER = (KIMI_K2.kv_lora_rank + KIMI_K2.qk_rope_dim) * BF16_BYTES


QUANTIZATION_SOURCE = (
    "K2-Thinking's native INT4 (W4A16, one scale per 32 weights, routed experts only), assumed for Kimi-K2.5"
)


def pass_bytes(
    tokens: float,
    layout: Layout = Layout.TP,
    gpus: int = 8,
    layers: int | None = None,
    context: int = 0,
    streams_on_busiest: float = 1,
    model: ModelShape = KIMI_K2,
    expert_bytes_per_weight: float = INT4_BYTES_PER_WEIGHT,
) -> PassBytes:
    """Bytes the busiest GPU reads for one pass of ``tokens`` tokens over ``layers`` layers (default: all),
    with ``streams_on_busiest`` requests of ``context`` tokens of KV each on that GPU: the case study's model
    through the one bytes function every pass is priced with (:meth:`ModelCosts.pass_parts`)."""
    costs = replace(kimi_k25_costs(model), expert_bytes_per_weight=expert_bytes_per_weight)
    return costs.pass_parts(
        tokens, streams_on_busiest, context, gpus, layout=layout, layers=layers, kv_streams=streams_on_busiest
    )


def floor_box(
    layout: Layout = Layout.TP, gpus: int = 8, context: int = 0, expert_bytes_per_weight: float = INT4_BYTES_PER_WEIGHT
) -> Box:
    """The case study's model on ``gpus`` RTX PRO 6000s laid out as ``layout``, as the pricer takes it for a floor
    (no collective priced: a floor is the bytes alone)."""
    costs = replace(kimi_k25_costs(), expert_bytes_per_weight=expert_bytes_per_weight)
    gpu = gpu_named("rtx-pro-6000")
    return Box(costs, gpu, tp=gpus, context=context, layout=layout, allreduce_us=constant_curve(0.0))


def pass_floor_ms(
    tokens: float, layout: Layout = Layout.TP, gpus: int = 8, context: int = 0, streams: float = 1
) -> float:
    """The case study's pass of ``tokens`` tokens at the card's datasheet bandwidth (:func:`pricer.floor_ms`)."""
    return floor_ms(floor_box(layout, gpus, context), tokens, streams, RTX_PRO_6000_BLACKWELL_GBS)


def weights_per_gpu_bytes(
    layout: Layout, gpus: int = 8, pipeline_stages: int = 1, model: ModelShape = KIMI_K2
) -> float:
    """Weights one GPU holds: replicated parts counted once per GPU, INT4 experts with their scales."""
    layers = model.layers / pipeline_stages
    moe_layers = (model.layers - model.dense_layers) / pipeline_stages  # the first layers are dense: no experts
    dense_layers = layers - moe_layers
    tp = gpus if layout is Layout.TP else 1
    attention = ShardShape(model, gpus if layout is not Layout.EP_DP_ATTENTION else 1).attention_weight_elems()
    experts = model.experts // (1 if layout is Layout.TP else gpus)
    expert_bytes = experts * ShardShape(model, tp).expert_weight_elems() * INT4_BYTES_PER_WEIGHT
    shard = ShardShape(model, gpus)
    moe_bf16 = (shard.router_weight_elems() + shard.expert_weight_elems()) * BF16_BYTES  # router, shared expert
    dense_mlp = shard.dense_mlp_weight_elems() * BF16_BYTES
    head_and_embedding = 2 * model.vocab * model.hidden * BF16_BYTES / gpus / pipeline_stages
    return (
        layers * attention * BF16_BYTES
        + moe_layers * (moe_bf16 + expert_bytes)
        + dense_layers * dense_mlp
        + head_and_embedding
    )


def kv_bytes_per_token(layers: int = KIMI_K2.layers) -> int:
    """Latent KV bytes one token of context holds on a GPU that keeps it (all layers)."""
    return MLA_KV_BYTES_PER_TOKEN_LAYER * layers


INT4_BYTES = INT4_BYTES_PER_WEIGHT  # 4-bit weights plus one bf16 scale per 32 (see floors)


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
            comm = price_pass(box, box.target, 1, 1, Scenario(gbs, box.gpu.tflops.low, "low")).collectives_ms
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
