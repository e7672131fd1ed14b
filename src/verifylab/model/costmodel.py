"""The cost model of a tensor-parallel forward pass and of an EAGLE-3 cycle.

Terms (all named, all in the output):
- ``compute_ms``: matmuls, attention, MoE of the pass (k tokens), without communication;
- ``allreduce_ms = n_allreduce x latency(message bytes, implementation, ranks, link)``;
- ``norm_ms = n_allreduce x norm_us``: the residual add + RMSNorm after each all-reduce, as separate kernels;
- ``launch_ms = launches x launch_us`` (small under CUDA graphs).
verify(k) = the sum; EAGLE-3 cycle = draft + verify; tokens/s per stream = accept length / cycle.
"""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import BaseModel, Field, ValidationError

from verifylab.errors import ModelInputError

Kind = Literal["baseline", "kernel_fusion", "algorithm_substitution", "elimination", "combined"]
FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048  # SGLang: fusion applies only up to this many tokens per forward
ONESHOT_MAX_BYTES = {2: 512 << 20, 4: 64 << 20, 8: 42 << 20}  # FlashInfer _should_use_oneshot thresholds
TWOSHOT_OVER_ONESHOT = 2.0  # assumption: two hops instead of one


def _validated(model: type[BaseModel], **values) -> BaseModel:
    try:
        return model(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or model.__name__
        raise ModelInputError(f"{model.__name__}: '{field}' = {err.get('input')!r}: {err['msg']}") from None


class PassTerms(BaseModel):
    """The cost terms of one forward pass (decode step or verify pass)."""

    name: str
    kind: Kind = "baseline"
    tokens: int = Field(ge=1, description="tokens in the pass (batch x draft tokens for a verify)")
    compute_ms: float = Field(ge=0)
    allreduces: int = Field(ge=0)
    allreduce_us: float = Field(ge=0, description="latency of one all-reduce")
    norm_us: float = Field(0.0, ge=0, description="separate add+RMSNorm cost per all-reduce (0 when fused)")
    launches: int = Field(0, ge=0)
    launch_us: float = Field(0.0, ge=0)
    fusion_applied: bool = True
    note: str = ""

    @property
    def allreduce_ms(self) -> float:
        return self.allreduces * self.allreduce_us / 1e3

    @property
    def norm_ms(self) -> float:
        return self.allreduces * self.norm_us / 1e3

    @property
    def launch_ms(self) -> float:
        return self.launches * self.launch_us / 1e3

    @property
    def total_ms(self) -> float:
        return self.compute_ms + self.allreduce_ms + self.norm_ms + self.launch_ms


def pass_terms(**values) -> PassTerms:
    """Validated :class:`PassTerms` (a clear :class:`ModelInputError` naming the field otherwise)."""
    return _validated(PassTerms, **values)  # type: ignore[return-value]


def eagle3_tokens_per_s(accept_length: float, verify_ms: float, draft_ms: float) -> float:
    """Tokens per second of one stream: accepted tokens per cycle over the cycle time."""
    if accept_length <= 0:
        raise ModelInputError(f"accept_length = {accept_length}: must be > 0 (tokens accepted per verify)")
    if verify_ms < 0 or draft_ms < 0:
        raise ModelInputError(f"verify_ms = {verify_ms}, draft_ms = {draft_ms}: times must be >= 0")
    cycle = verify_ms + draft_ms
    if cycle == 0:
        raise ModelInputError("verify_ms + draft_ms = 0: a cycle takes time")
    return accept_length / cycle * 1e3


class LinkLatency(BaseModel):
    """Alpha-beta latency of one all-reduce on a link: steps x alpha + bytes on the wire / bandwidth."""

    alpha_us: float = Field(gt=0, description="per sequential step (hop + synchronisation)")
    bandwidth_gbs: float = Field(gt=0, description="per-direction bandwidth per GPU")

    def ring_us(self, message_bytes: float, ranks: int) -> float:
        """NCCL-style ring all-reduce: 2(n-1) sequential steps, 2(n-1)/n of the message each way."""
        steps = 2 * (ranks - 1)
        return steps * self.alpha_us + (steps / ranks) * message_bytes / (self.bandwidth_gbs * 1e3)

    def oneshot_us(self, message_bytes: float, ranks: int) -> float:
        """One-shot push (FlashInfer/TRT-LLM Lamport): one hop, each rank sends its message to n-1 peers."""
        return self.alpha_us + (ranks - 1) * message_bytes / (self.bandwidth_gbs * 1e3)

    def twoshot_us(self, message_bytes: float, ranks: int) -> float:
        """Two-shot: reduce-scatter + all-gather, two hops, 2(n-1)/n of the message."""
        return 2 * self.alpha_us + 2 * (ranks - 1) / ranks * message_bytes / (self.bandwidth_gbs * 1e3)


def uses_oneshot(tokens: int, hidden: int, ranks: int, itemsize: int = 2) -> bool:
    """FlashInfer's size rule: one-shot while tokens x hidden x 2 x ranks x itemsize <= threshold."""
    threshold = ONESHOT_MAX_BYTES.get(ranks)
    if threshold is None:
        return False
    return tokens * hidden * 2 * ranks * itemsize <= threshold


def max_oneshot_tokens(hidden: int, ranks: int, itemsize: int = 2) -> int:
    """Largest token count that keeps FlashInfer on one-shot (TP 8, hidden 7168: 192)."""
    return ONESHOT_MAX_BYTES[ranks] // (hidden * 2 * ranks * itemsize)


def components_long(frame: pd.DataFrame) -> pd.DataFrame:
    """Verify time by component, long format (for the stacked chart): one row per ``<component>_ms`` column that
    is above 0 (``all-reduce_ms`` -> ``all-reduce``)."""
    parts = frame.melt(
        id_vars=["name", "kind"],
        value_vars=[c for c in frame.columns if c.endswith("_ms")],
        var_name="component",
        value_name="ms",
    )
    parts["component"] = parts["component"].str.removesuffix("_ms")
    return parts[parts["ms"] > 0]
