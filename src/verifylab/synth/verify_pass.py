"""The synthetic verify pass: a TP shard of a DeepSeek-V3/Kimi-K2-shaped layer stack run on k tokens.

Each layer does real sharded matmuls (MLA projections, attention over a KV cache, routed + shared
experts) and two all-reduces (after o_proj and after the MoE), each followed by residual add + RMSNorm; how
the shards are joined is a ``SeparateComm`` (all-reduce, then a norm kernel: FlashInfer's one fused
add+RMSNorm kernel as in SGLang, or PyTorch's several) or a ``FusedComm`` (one all-reduce + add + norm kernel).
Routing is fixed per run (the experts a k-token pass touches, uniform top-k), so a CUDA graph can capture the pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from verifylab.shapes import ShardShape

EPS = 1e-6
AllReduce = Callable[[torch.Tensor], torch.Tensor]
AddNorm = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
ATTENTION_SITE, MLP_SITE = 0, 1  # the two places per layer where a TP pass all-reduces


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Reference RMSNorm (float32 accumulation), as separate PyTorch kernels."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def add_rmsnorm_unfused(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """residual += x; return rmsnorm(residual), residual — PyTorch, several kernels."""
    residual = residual + x
    return rmsnorm(residual, weight), residual


def add_rmsnorm_flashinfer(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashInfer's fused add+RMSNorm: one kernel, in place (x becomes the normed output)."""
    from flashinfer.norm import fused_add_rmsnorm

    fused_add_rmsnorm(x, residual, weight, EPS)
    return x, residual


def identity_allreduce(x: torch.Tensor) -> torch.Tensor:
    return x


def dist_allreduce(x: torch.Tensor) -> torch.Tensor:
    """In-place sum across the default process group (gloo or NCCL)."""
    torch.distributed.all_reduce(x)
    return x


@dataclass
class SeparateComm:
    """All-reduce (at the ``sites`` kept), then a separate add+RMSNorm kernel: SGLang's unfused path.

    ``sites`` smaller than both sites is the elimination stand-in (what removing those all-reduces saves)."""

    allreduce: AllReduce = identity_allreduce
    add_norm: AddNorm = add_rmsnorm_unfused
    sites: frozenset[int] = field(default_factory=lambda: frozenset({ATTENTION_SITE, MLP_SITE}))

    def __call__(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, site: int):
        if site in self.sites:
            x = self.allreduce(x)
        return self.add_norm(x, residual, weight)


@dataclass
class FusedComm:
    """All-reduce + residual add + RMSNorm in one call (FlashInfer's fused kernel) at every site."""

    fused: AddNorm

    def __call__(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, site: int):
        return self.fused(x, residual, weight)


LayerComm = SeparateComm | FusedComm


def layer_comm(allreduce: AllReduce, add_norm: AddNorm, allreduces_per_layer: int = 2) -> SeparateComm:
    """All-reduce at the first ``allreduces_per_layer`` sites (attention, then MLP), a norm kernel after each site:
    2 is SGLang's TP layer; 1 and 0 are the elimination stand-ins."""
    return SeparateComm(allreduce, add_norm, frozenset([ATTENTION_SITE, MLP_SITE][:allreduces_per_layer]))


@dataclass
class Routing:
    """Fixed expert routing of a k-token pass: which experts, which tokens each, with what gate weight."""

    experts: int  # distinct experts touched
    token_index: torch.Tensor  # (experts, slots) int64 into rows of a (k+1, H) padded input; k = padding
    gate: torch.Tensor  # (experts, slots, 1)


def make_routing(tokens: int, n_experts: int, per_token: int, gen: torch.Generator, device, dtype) -> Routing:
    """Uniform top-``per_token`` routing of ``tokens`` tokens, packed per touched expert."""
    chosen = torch.stack([torch.randperm(n_experts, generator=gen)[:per_token] for _ in range(tokens)])
    touched = torch.unique(chosen)
    per_expert = [torch.nonzero((chosen == e).any(dim=1)).flatten() for e in touched.tolist()]
    slots = max(len(t) for t in per_expert)
    index = torch.full((len(touched), slots), tokens, dtype=torch.long)
    for row, toks in enumerate(per_expert):
        index[row, : len(toks)] = toks
    gate = torch.full((len(touched), slots, 1), 1.0 / per_token)
    return Routing(len(touched), index.to(device), gate.to(device=device, dtype=dtype))


class ShardLayer:
    """Weights of one layer's shard; ``forward`` runs it on (k, H) hidden states."""

    def __init__(
        self,
        shard: ShardShape,
        tokens: int,
        context: int,
        dense: bool,
        routing: Routing | None,
        gen: torch.Generator,
        device,
        dtype,
    ) -> None:
        m = shard.model
        h = shard.heads

        def w(*shape: int) -> torch.Tensor:
            fan_in = shape[-2] if len(shape) >= 2 else shape[-1]
            t = torch.randn(*shape, generator=gen, device=gen.device, dtype=torch.float32)
            return t.div_(fan_in**0.5).to(device=device, dtype=dtype)

        self.shard, self.dense, self.routing = shard, dense, routing
        self.q_a = w(m.hidden, m.q_lora_rank)
        self.q_a_norm = torch.ones(m.q_lora_rank, device=device, dtype=dtype)
        self.q_b = w(m.q_lora_rank, h * shard.qk_dim)
        self.kv_a = w(m.hidden, m.kv_lora_rank + m.qk_rope_dim)
        self.kv_a_norm = torch.ones(m.kv_lora_rank, device=device, dtype=dtype)
        self.kv_b = w(m.kv_lora_rank, h * (m.qk_nope_dim + m.v_dim))
        self.o_proj = w(h * m.v_dim, m.hidden)
        self.k_cache = w(1, h, context, shard.qk_dim)
        self.v_cache = w(1, h, context, m.v_dim)
        self.post_attn_norm = torch.ones(m.hidden, device=device, dtype=dtype)
        self.next_input_norm = torch.ones(m.hidden, device=device, dtype=dtype)
        if dense:
            self.gate_up = w(m.hidden, 2 * shard.dense_inter)
            self.down = w(shard.dense_inter, m.hidden)
        else:
            assert routing is not None
            self.router = w(m.hidden, m.experts)
            self.expert_gate_up = w(routing.experts, m.hidden, 2 * shard.expert_inter)
            self.expert_down = w(routing.experts, shard.expert_inter, m.hidden)
            self.shared_gate_up = w(m.hidden, 2 * shard.expert_inter * m.shared_experts)
            self.shared_down = w(shard.expert_inter * m.shared_experts, m.hidden)

    @staticmethod
    def _swiglu(x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        m, h, k = self.shard.model, self.shard.heads, x.shape[0]
        q = rmsnorm(x @ self.q_a, self.q_a_norm) @ self.q_b
        kv_latent = x @ self.kv_a
        _new_kv = rmsnorm(kv_latent[:, : m.kv_lora_rank], self.kv_a_norm) @ self.kv_b  # new tokens' K/V
        q = q.view(k, h, self.shard.qk_dim).transpose(0, 1).unsqueeze(0)
        attn = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache)
        return attn.squeeze(0).transpose(0, 1).reshape(k, h * m.v_dim) @ self.o_proj

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        if self.dense:
            return self._swiglu(x @ self.gate_up) @ self.down
        r = self.routing
        assert r is not None
        _logits = torch.topk(x @ self.router, self.shard.model.experts_per_token, dim=-1)  # router cost
        padded = torch.cat([x, x.new_zeros(1, x.shape[1])])
        xe = padded[r.token_index]  # (experts, slots, H)
        ye = torch.bmm(self._swiglu(torch.bmm(xe, self.expert_gate_up)), self.expert_down) * r.gate
        out = padded.new_zeros(padded.shape).index_add_(0, r.token_index.flatten(), ye.flatten(0, 1))[:-1]
        return out + self._swiglu(x @ self.shared_gate_up) @ self.shared_down

    def forward(self, x: torch.Tensor, residual: torch.Tensor, comm: LayerComm) -> tuple[torch.Tensor, torch.Tensor]:
        x, residual = comm(self.attention(x), residual, self.post_attn_norm, ATTENTION_SITE)
        return comm(self.mlp(x), residual, self.next_input_norm, MLP_SITE)


class ShardStack:
    """``layers`` shard layers, each with its own weights (so a cache cannot hide the weight reads)."""

    def __init__(
        self,
        shard: ShardShape,
        tokens: int,
        layers: int,
        context: int = 2048,
        seed: int = 0,
        device="cpu",
        dtype=torch.float32,
        first_dense: int | None = None,
    ) -> None:
        gen = torch.Generator(device=device).manual_seed(seed)  # weights made where they live
        route_gen = torch.Generator().manual_seed(seed)
        m = shard.model
        dense_count = m.dense_layers if first_dense is None else first_dense
        self.tokens, self.shard, self.device, self.dtype = tokens, shard, device, dtype
        self.routing = make_routing(tokens, m.experts, m.experts_per_token, route_gen, device, dtype)
        self.layers = [
            ShardLayer(
                shard,
                tokens,
                context,
                i < dense_count,
                None if i < dense_count else self.routing,
                gen,
                device,
                dtype,
            )
            for i in range(layers)
        ]
        self.x = torch.randn(tokens, m.hidden, generator=gen, device=device).to(dtype)
        self.residual = torch.randn(tokens, m.hidden, generator=gen, device=device).to(dtype)
        self.context = context

    def weight_bytes(self) -> int:
        """Bytes of every weight and KV-cache tensor the stack reads per pass."""
        return sum(
            t.numel() * t.element_size()
            for layer in self.layers
            for t in vars(layer).values()
            if isinstance(t, torch.Tensor) and t.dtype != torch.long
        )

    def forward(
        self,
        allreduce: AllReduce = identity_allreduce,
        add_norm: AddNorm = add_rmsnorm_unfused,
        comm: LayerComm | None = None,
    ) -> torch.Tensor:
        """One pass over every layer; ``comm`` (default: ``allreduce`` then ``add_norm``) joins the shards."""
        comm = comm or SeparateComm(allreduce, add_norm)
        x, residual = self.x.clone(), self.residual.clone()
        for layer in self.layers:
            x, residual = layer.forward(x, residual, comm)
        return x
