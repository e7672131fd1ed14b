"""The cost model of a tensor-parallel forward pass and of an EAGLE-3 cycle.

Terms (all named, all in the output):
- ``compute_ms``: matmuls, attention, MoE of the pass (k tokens), without communication;
- ``allreduce_ms = n_allreduce x latency(message bytes, implementation, ranks, link)``;
- ``norm_ms = n_allreduce x norm_us``: the residual add + RMSNorm after each all-reduce, as separate kernels;
- ``launch_ms = launches x launch_us`` (small under CUDA graphs).
verify(k) = the sum; EAGLE-3 cycle = draft + verify; tokens/s per stream = accept length / cycle.
"""

from __future__ import annotations

import math
from typing import Literal

import pandas as pd
from pydantic import BaseModel, Field, ValidationError, model_validator

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


class CaseInputs(BaseModel):
    """Inputs of the what-if analysis, each with where it came from."""

    layers: int = Field(61, ge=1)
    allreduces_per_layer: int = Field(2, ge=0)
    extra_allreduces: int = Field(0, ge=0, description="e.g. the vocab-parallel embedding's all-reduce")
    hidden: int = Field(7168, ge=1)
    ranks: int = Field(8, ge=1)
    draft_tokens: int = Field(4, ge=1, description="tokens per verify at one stream")
    verify_ms: float = Field(gt=0)
    verify_allreduce_ms: float = Field(ge=0)
    accept_length: float = Field(gt=0)
    draft_ms: float = Field(ge=0)
    norm_us_unfused: float = Field(ge=0, description="add+RMSNorm as separate kernels, per all-reduce")
    norm_us_fused: float = Field(ge=0, description="the same inside the fused kernel (extra cost, ~0)")
    oneshot_allreduce_us: float = Field(gt=0, description="one-shot all-reduce latency assumed for substitution")
    link_bound_oneshot_us: float | None = Field(None, gt=0, description="pure link-model one-shot latency (bound)")
    sources: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> CaseInputs:
        if self.verify_allreduce_ms > self.verify_ms:
            raise ValueError(f"verify_allreduce_ms {self.verify_allreduce_ms} exceeds verify_ms {self.verify_ms}")
        return self

    @property
    def allreduces(self) -> int:
        return self.layers * self.allreduces_per_layer + self.extra_allreduces

    @property
    def allreduce_us(self) -> float:
        return self.verify_allreduce_ms * 1e3 / self.allreduces if self.allreduces else 0.0

    @property
    def compute_ms(self) -> float:
        """Everything in the verify pass that is not all-reduce (norms included)."""
        return self.verify_ms - self.verify_allreduce_ms


def case_inputs(**values) -> CaseInputs:
    return _validated(CaseInputs, **values)  # type: ignore[return-value]


def whatif_scenarios(case: CaseInputs, batch: int = 1) -> list[PassTerms]:
    """Baseline, kernel fusion, algorithm substitution, elimination and fusion+substitution, at ``batch``
    concurrent streams (verify tokens = batch x draft tokens; compute grows, latency-bound comm does not)."""
    tokens = batch * case.draft_tokens
    compute_non_norm = max(case.compute_ms - case.allreduces * case.norm_us_unfused / 1e3, 0.0)
    compute_non_norm *= compute_scale(case.draft_tokens, tokens)
    fusion_ok = tokens <= FUSE_ALLREDUCE_MAX_BATCH_SIZE
    base = pass_terms(
        name="baseline (NCCL + separate add+RMSNorm)",
        kind="baseline",
        tokens=tokens,
        compute_ms=compute_non_norm,
        allreduces=case.allreduces,
        allreduce_us=case.allreduce_us,
        norm_us=case.norm_us_unfused,
        note="reported verify pass, split into its terms",
    )
    fused_norm = case.norm_us_fused if fusion_ok else case.norm_us_unfused
    kernel_fusion = base.model_copy(
        update={
            "name": "kernel fusion only (same NCCL latency, norm inside the kernel)",
            "kind": "kernel_fusion",
            "norm_us": fused_norm,
            "fusion_applied": fusion_ok,
            "note": "fewer launches and one less round trip through memory per all-reduce"
            + ("" if fusion_ok else f"; fusion not applied: {tokens} tokens > {FUSE_ALLREDUCE_MAX_BATCH_SIZE}"),
        }
    )
    oneshot = uses_oneshot(tokens, case.hidden, case.ranks)
    fused_ar_us = case.oneshot_allreduce_us * (1 if oneshot else TWOSHOT_OVER_ONESHOT)
    substitution = base.model_copy(
        update={
            "name": "algorithm substitution (one-shot push instead of NCCL ring)",
            "kind": "algorithm_substitution",
            "allreduce_us": fused_ar_us if fusion_ok else case.allreduce_us,
            "fusion_applied": fusion_ok,
            "note": "same count, lower latency per all-reduce"
            + (
                ""
                if oneshot
                else f"; two-shot above {max_oneshot_tokens(case.hidden, case.ranks)} tokens "
                f"(assumed {TWOSHOT_OVER_ONESHOT:g}x the one-shot latency: two hops)"
            ),
        }
    )
    combined = substitution.model_copy(
        update={
            "name": "FlashInfer fusion = substitution + kernel fusion",
            "kind": "combined",
            "norm_us": fused_norm,
            "note": "what SGLang's fused path does: one-shot all-reduce with add+RMSNorm in one kernel",
        }
    )
    extra = []
    if case.link_bound_oneshot_us is not None and fusion_ok:
        extra.append(
            substitution.model_copy(
                update={
                    "name": "substitution, pure link model (bound)",
                    "allreduce_us": case.link_bound_oneshot_us,
                    "note": "one hop at the alpha that makes a ring take the reported latency: an optimistic bound",
                }
            )
        )
    removed = allreduces_to_remove(base, combined.total_ms)
    elimination = base.model_copy(
        update={
            "name": f"elimination: remove {removed} of {case.allreduces} all-reduces",
            "kind": "elimination",
            "allreduces": case.allreduces - removed,
            "note": "fewer all-reduces (fewer TP ranks, DP attention, sequence parallelism, overlap), "
            "sized to match the fused path",
        }
    )
    return [base, kernel_fusion, substitution, combined, elimination, *extra]


def solve_allreduce_us(case: CaseInputs, target_tokens_per_s: float) -> float:
    """Per-all-reduce latency at which the fused path (fused norm) reaches ``target_tokens_per_s``."""
    if target_tokens_per_s <= 0:
        raise ModelInputError(f"target tokens/s = {target_tokens_per_s}: must be > 0")
    verify_target = case.accept_length / target_tokens_per_s * 1e3 - case.draft_ms
    compute_non_norm = case.compute_ms - case.allreduces * case.norm_us_unfused / 1e3
    per = (verify_target - compute_non_norm) * 1e3 / case.allreduces - case.norm_us_fused
    if per <= 0:
        raise ModelInputError(
            f"{target_tokens_per_s} tok/s is out of reach even with free all-reduces (compute + draft too long)"
        )
    return per


def compute_scale(from_tokens: int, to_tokens: int) -> float:
    """How compute grows with tokens per pass: by the weight bytes a pass must read (attention + the
    expected distinct experts of uniform top-8 routing), the weight-streaming regime of decode/verify."""
    from verifylab.shapes import KIMI_K2, ShardShape, expected_distinct_experts, weight_bytes_per_layer

    shard = ShardShape(KIMI_K2, 8)

    def read(tokens: int) -> float:
        return weight_bytes_per_layer(shard, expected_distinct_experts(tokens))

    return read(to_tokens) / read(from_tokens)


def allreduces_to_remove(base: PassTerms, target_ms: float) -> int:
    """How many of ``base``'s all-reduces (each with its norm) must go to bring it to ``target_ms``."""
    per = (base.allreduce_us + base.norm_us) / 1e3
    if per <= 0:
        return 0
    return min(base.allreduces, max(0, math.ceil((base.total_ms - target_ms) / per)))


def scenarios_frame(case: CaseInputs, scenarios: list[PassTerms]) -> pd.DataFrame:
    """One row per scenario with its terms, verify time and EAGLE-3 tokens/s; ``provenance='modelled'``."""
    rows = []
    for s in scenarios:
        rows.append(
            {
                "name": s.name,
                "kind": s.kind,
                "tokens": s.tokens,
                "allreduces_per_pass": s.allreduces,
                "allreduce_us": round(s.allreduce_us, 2),
                "compute_ms": s.compute_ms,
                "allreduce_ms": s.allreduce_ms,
                "norm_ms": s.norm_ms,
                "launch_ms": s.launch_ms,
                "verify_ms": s.total_ms,
                "eagle3_tokens_per_s": eagle3_tokens_per_s(case.accept_length, s.total_ms, case.draft_ms),
                "fusion_applied": s.fusion_applied,
                "note": s.note,
                "provenance": "modelled",
            }
        )
    return pd.DataFrame(rows)


def components_long(frame: pd.DataFrame) -> pd.DataFrame:
    """Verify time by component, long format (for the stacked chart)."""
    parts = frame.melt(
        id_vars=["name", "kind"],
        value_vars=["compute_ms", "allreduce_ms", "norm_ms", "launch_ms"],
        var_name="component",
        value_name="ms",
    )
    parts["component"] = parts["component"].str.replace("_ms", "", regex=False)
    return parts[parts["ms"] > 0]
