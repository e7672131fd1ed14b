"""Kimi-K2 shapes and their tensor-parallel shards, with the bytes each pass must read.

Source of the model shape: Kimi-K2's published config (moonshotai/Kimi-K2-Instruct ``config.json``):
hidden 7168, 61 layers (the first dense, ``first_k_dense_replace = 1``), 64 heads of multi-head latent
attention (q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64, v 128), 384 routed experts,
8 per token, 1 shared expert, expert intermediate 2048, dense intermediate 18432, vocabulary 163840.
Sharding follows SGLang's DeepSeek-V2/V3 layers at TP=N without expert parallelism: q_a/kv_a projections
and the router replicated; q_b, kv_b and expert gate/up column-parallel; o_proj and expert down
row-parallel (hence one all-reduce after attention and one after the MoE).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from verifylab.vocab import BF16_BYTES


@dataclass(frozen=True)
class ModelShape:
    """The dimensions of a DeepSeek-V3-style MoE transformer."""

    hidden: int = 7168
    layers: int = 61
    dense_layers: int = 1
    heads: int = 64
    q_lora_rank: int = 1536
    kv_lora_rank: int = 512
    qk_nope_dim: int = 128
    qk_rope_dim: int = 64
    v_dim: int = 128
    experts: int = 384
    experts_per_token: int = 8
    shared_experts: int = 1
    expert_intermediate: int = 2048
    dense_intermediate: int = 18432
    vocab: int = 163840

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


KIMI_K2 = ModelShape()


def small_shape(hidden: int = 64, layers: int = 61) -> ModelShape:
    """A tiny model of the same structure for CPU (gloo) runs and tests."""
    return ModelShape(
        hidden=hidden,
        layers=layers,
        dense_layers=min(1, layers),
        heads=8,
        q_lora_rank=hidden // 2,
        kv_lora_rank=hidden // 4,
        qk_nope_dim=8,
        qk_rope_dim=4,
        v_dim=8,
        experts=16,
        experts_per_token=2,
        shared_experts=1,
        expert_intermediate=hidden,
        dense_intermediate=2 * hidden,
        vocab=1024,
    )


@dataclass(frozen=True)
class ShardShape:
    """Per-rank dimensions of one tensor-parallel shard."""

    model: ModelShape
    tp: int

    def __post_init__(self) -> None:
        for name in ("heads", "expert_intermediate", "dense_intermediate"):
            if getattr(self.model, name) % self.tp:
                raise ValueError(f"{name}={getattr(self.model, name)} is not divisible by tp={self.tp}")

    @property
    def heads(self) -> int:
        return self.model.heads // self.tp

    @property
    def qk_dim(self) -> int:
        return self.model.qk_nope_dim + self.model.qk_rope_dim

    @property
    def expert_inter(self) -> int:
        return self.model.expert_intermediate // self.tp

    @property
    def dense_inter(self) -> int:
        return self.model.dense_intermediate // self.tp

    def attention_weight_elems(self) -> int:
        """q_a, q_b, kv_a, kv_b and o_proj elements per rank and layer."""
        m = self.model
        return (
            m.hidden * m.q_lora_rank  # q_a (replicated)
            + m.q_lora_rank * self.heads * self.qk_dim  # q_b (column-parallel)
            + m.hidden * (m.kv_lora_rank + m.qk_rope_dim)  # kv_a (replicated)
            + m.kv_lora_rank * self.heads * (m.qk_nope_dim + m.v_dim)  # kv_b (column-parallel)
            + self.heads * m.v_dim * m.hidden  # o_proj (row-parallel)
        )

    def expert_weight_elems(self) -> int:
        """gate+up and down elements of one expert's shard."""
        return 3 * self.model.hidden * self.expert_inter

    def dense_mlp_weight_elems(self) -> int:
        return 3 * self.model.hidden * self.dense_inter

    def router_weight_elems(self) -> int:
        return self.model.hidden * self.model.experts


def expected_distinct_experts(tokens: float, experts: int = 384, per_token: int = 8) -> float:
    """Expected number of distinct experts hit by ``tokens`` independent tokens under uniform top-k routing (a
    fractional count of tokens interpolates: what a verify chain whose tokens share experts draws)."""
    return experts * (1.0 - (1.0 - per_token / experts) ** tokens)


def weight_bytes_per_layer(
    shard: ShardShape, experts_touched: int, dense: bool = False, bytes_per_elem: float = BF16_BYTES
) -> float:
    """Bytes of weights one rank must read for one layer of a pass touching ``experts_touched`` experts."""
    attention = shard.attention_weight_elems()
    if dense:
        mlp = shard.dense_mlp_weight_elems()
    else:
        mlp = shard.router_weight_elems() + (experts_touched + shard.model.shared_experts) * shard.expert_weight_elems()
    return (attention + mlp) * bytes_per_elem


def expert_bytes_per_layer_all(shard: ShardShape, bytes_per_elem: float = BF16_BYTES) -> float:
    """Bytes of all routed experts of one layer on one rank (why 61 layers do not fit one GPU)."""
    return shard.model.experts * shard.expert_weight_elems() * bytes_per_elem
