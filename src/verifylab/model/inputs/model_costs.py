"""What a forward pass of a served model reads and computes, per GPU and layout (:class:`ModelCosts`): its bytes by
part, its arithmetic, its weights, and the routed experts a pass of T tokens from C streams reads."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from enum import StrEnum
from itertools import accumulate

from verifylab.errors import ModelInputError
from verifylab.shapes import expected_distinct_experts

BF16 = 2.0


INT4_WITH_SCALES = 0.5 + BF16 / 32  # 4 bits + one bf16 scale per group of 32 weights


class Layout(StrEnum):
    """How a layer's attention and experts are spread over the GPUs of one box."""

    TP = "tensor parallel"  # attention and every expert sharded over all GPUs
    EP_TP_ATTENTION = "expert parallel, tensor-parallel attention"  # experts whole; attention sharded
    EP_DP_ATTENTION = "expert parallel, data-parallel attention"  # experts whole; attention replicated


@dataclass(frozen=True)
class PassBytes:
    """Bytes the busiest GPU reads in one pass, by part (all layers of the pass)."""

    attention: float
    experts: float
    shared_and_dense: float
    head: float
    kv: float

    @property
    def total(self) -> float:
        return self.attention + self.experts + self.shared_and_dense + self.head + self.kv


@functools.lru_cache(maxsize=65536)  # a pricer asks the same few counts thousands of times per table
def busiest_gpu_experts(experts_hit: float, gpus: int, experts: int) -> float:
    """Expected experts the busiest GPU must read when ``experts_hit`` of ``experts`` (placed whole, evenly) are
    hit at random: the expected maximum of ``gpus`` binomial counts (uniform routing)."""
    per_gpu = experts // gpus
    p = min(max(experts_hit / experts, 0.0), 1.0)
    cdf = accumulate(math.comb(per_gpu, i) * p**i * (1 - p) ** (per_gpu - i) for i in range(per_gpu))  # F(j)
    return sum(1 - c**gpus for c in cdf)  # E[max] = sum over j of P(max > j) = sum (1 - F(j)^gpus)


class Routing(StrEnum):
    UNIFORM = "uniform"  # a trained router: tokens spread over the experts
    COLLAPSED = "collapsed"  # every token to the same top-k experts (random weights, identical tokens)


@dataclass(frozen=True)
class ModelCosts:
    """What a forward pass of a model costs in bytes and arithmetic, per layer kind (full model, before TP)."""

    name: str
    layers: int
    moe_layers: int
    hidden: int
    attention_sharded: float  # weights split by TP, per layer (elements)
    attention_replicated: float  # weights every TP rank reads whole, per layer (elements)
    kv_bytes_per_token_layer: float  # one token of context, one layer
    kv_sharded: bool  # GQA heads split by TP; MLA's latent is kept whole on every rank
    experts: int
    experts_per_token: int
    expert_weights: float  # one routed expert (elements)
    shared_weights: float  # shared experts of one MoE layer (elements)
    dense_mlp_weights: float  # the MLP of one dense layer (elements)
    router_weights: float  # per MoE layer (elements, replicated)
    vocab: int
    expert_bytes_per_weight: float = BF16
    dense_bytes_per_weight: float = BF16  # attention, dense MLPs and shared experts (bf16 unless quantized too)
    quantization: str = "bf16"  # what the weights are, in words (from the config's quantization_config)

    # ---------------------------------------------------------------- per pass
    def experts_read(
        self, tokens: float, routing: Routing = Routing.UNIFORM, streams: float | None = None, overlap: float = 0.0
    ) -> float:
        """Distinct routed experts a pass of ``tokens`` tokens from ``streams`` streams (default: one token each)
        reads per MoE layer; ``overlap``: how much of a stream's chain shares its experts (module docstring)."""
        if self.experts == 0:
            return 0.0
        if routing is Routing.COLLAPSED:
            return float(min(self.experts_per_token, self.experts))
        return expected_distinct_experts(
            independent_draws(tokens, streams, overlap), self.experts, self.experts_per_token
        )

    def pass_parts(
        self,
        tokens: float,
        streams: float,
        context: float,
        tp: int = 1,
        routing: Routing = Routing.UNIFORM,
        overlap: float = 0.0,
        layout: Layout = Layout.TP,
        layers: int | None = None,
        kv_streams: float | None = None,
    ) -> PassBytes:
        """Bytes the busiest of ``tp`` GPUs reads in a pass of ``tokens`` tokens over ``streams`` requests holding
        ``context`` tokens of KV each, by part: every layer's weights it needs, the LM head, the KV it attends over.
        ``layout``: experts sharded (TP) or whole on their GPUs (EP: the busiest GPU's expected count), attention
        sharded or replicated per request (DP); ``layers``: a pipeline stage's (all MoE; no LM head); ``kv_streams``:
        the requests whose KV the GPU holds (default: all)."""
        stage = layers is not None and layers != self.layers
        moe_layers = layers if layers is not None and stage else self.moe_layers
        all_layers = layers if layers is not None and stage else self.layers
        dense_layers, dense = all_layers - moe_layers, self.dense_bytes_per_weight
        attention_tp = 1 if layout is Layout.EP_DP_ATTENTION else tp
        attention = all_layers * (self.attention_sharded / attention_tp + self.attention_replicated) * dense
        read = self.experts_read(tokens, routing, streams, overlap)
        if layout is Layout.TP:
            experts = read * self.expert_weights * self.expert_bytes_per_weight / tp
        else:  # whole experts, placed evenly: the busiest GPU's expected share of those hit
            whole = busiest_gpu_experts(read, tp, self.experts)
            experts = whole * self.expert_weights * self.expert_bytes_per_weight
        shared = moe_layers * (self.shared_weights * dense / tp + self.router_weights * BF16)
        shared += dense_layers * self.dense_mlp_weights / tp * dense
        head = 0.0 if stage else self.vocab * self.hidden * BF16 / tp
        kv_sharded = self.kv_sharded and layout is not Layout.EP_DP_ATTENTION
        held = streams if kv_streams is None else kv_streams
        kv = held * context * self.kv_bytes_per_token_layer * all_layers / (tp if kv_sharded else 1)
        return PassBytes(attention, moe_layers * experts, shared, head, kv)

    def active_weights_per_token(self) -> float:
        """Weights one token multiplies by in a forward pass (all layers, the LM head), before TP."""
        dense_layers = self.layers - self.moe_layers
        per_token_experts = self.experts_per_token * self.expert_weights + self.shared_weights + self.router_weights
        attention = self.attention_sharded + self.attention_replicated
        return (
            self.layers * attention
            + dense_layers * self.dense_mlp_weights
            + self.moe_layers * per_token_experts
            + self.vocab * self.hidden
        )

    def pass_flops(self, tokens: float, context: float, tp: int = 1) -> float:
        """Floating-point operations one GPU of ``tp`` does: two per weight and token, and attention's scores and
        values over ``context`` tokens (four per context token, head dimension and layer, ~ hidden wide)."""
        attention = 4.0 * context * self.hidden * self.layers
        return tokens * (2.0 * self.active_weights_per_token() + attention) / tp

    def weights_bytes(self, tp: int = 1) -> float:
        """Weights one GPU holds (all experts, embeddings and LM head)."""
        dense_layers, dense = self.layers - self.moe_layers, self.dense_bytes_per_weight
        total = self.layers * (self.attention_sharded / tp + self.attention_replicated) * dense
        total += dense_layers * self.dense_mlp_weights / tp * dense
        experts = self.experts * self.expert_weights * self.expert_bytes_per_weight
        total += self.moe_layers * ((experts + self.shared_weights * dense) / tp + self.router_weights * BF16)
        return total + 2 * self.vocab * self.hidden * BF16 / tp


def independent_draws(tokens: float, streams: float | None = None, overlap: float = 0.0) -> float:
    """How many independent router draws ``tokens`` tokens of ``streams`` chains make when a chain's tokens share
    experts by ``overlap`` (0: every token its own draw; 1: one draw per chain); at least one."""
    if not 0.0 <= overlap <= 1.0:
        raise ModelInputError(f"routing overlap {overlap!r} must lie in 0..1 (0: independent tokens, 1: shared)")
    chains = tokens if streams is None else max(min(streams, tokens), 1.0)
    per_chain = tokens / chains
    return max(chains * (1.0 + (per_chain - 1.0) * (1.0 - overlap)), 1.0)
