"""What a communication probe measures: GPUs, message sizes (a verify pass's tokens x hidden x 2 bytes),
repetitions and deadlines, validated before any process starts."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from verifylab.vocab import DRAFT_TOKENS, KIMI_K2_HIDDEN, LOAD_STREAMS, allreduce_message_bytes

MAX_VERIFY_TOKENS = 512  # the largest verify pass the book prices: 32 streams x 8 draft tokens x 2


def default_tokens() -> list[int]:
    """A verify pass's token counts (1..512, powers of two) and chapter 04's C streams x k draft tokens."""
    powers = [1 << i for i in range(MAX_VERIFY_TOKENS.bit_length())]
    loads = [streams * k for streams in LOAD_STREAMS for k in DRAFT_TOKENS]
    return sorted(set(powers) | set(loads))


SUBGROUP_TOKENS = (4, 64, 512)  # pairs and halves: a latency-bound, a middle and the largest verify message


class ProbeConfig(BaseModel):
    """Parameters of ``verifylab comm probe``; every field is checked before a process starts."""

    gpus: list[int] | None = Field(
        None, description="GPU indices (CUDA order) to probe; default: every visible GPU", min_length=1
    )
    tokens: list[int] = Field(default_factory=default_tokens, min_length=1)
    subgroup_tokens: list[int] = Field(default_factory=lambda: list(SUBGROUP_TOKENS), min_length=1)
    hidden: int = Field(KIMI_K2_HIDDEN, ge=1, le=1 << 16)
    calls: int = Field(10, ge=1, le=1000, description="collectives per timed sample (captured in one CUDA graph)")
    replays: int = Field(15, ge=3, le=10_000, description="timed samples per size; the median is reported")
    timeout: float = Field(120.0, gt=0, description="seconds NCCL initialisation (and any one phase) may take")
    backend: Literal["nccl", "gloo"] = Field(
        "nccl", description="nccl on GPUs; gloo runs the same loop on CPU processes (mechanics, no verdict)"
    )
    ranks: int | None = Field(None, ge=2, le=64, description="gloo only: CPU processes to start")
    extra_impls: bool = Field(True, description="also FlashInfer's one-shot, two-shot and fused kernels")
    subgroups: bool = Field(True, description="with more than two GPUs, also every pair and both halves")
    peer_copies: bool = Field(True, description="measure a small and a large peer copy per GPU pair")

    @field_validator("tokens", "subgroup_tokens")
    @classmethod
    def _positive_sizes(cls, value: list[int]) -> list[int]:
        bad = [t for t in value if t <= 0]
        if bad:
            raise ValueError(f"token counts must be positive integers; got {bad}")
        return sorted(set(value))

    @field_validator("gpus")
    @classmethod
    def _distinct_gpus(cls, value: list[int] | None) -> list[int] | None:
        if value is None:
            return None
        if any(g < 0 for g in value) or len(set(value)) != len(value):
            raise ValueError(f"GPU indices must be distinct and >= 0; got {value}")
        return value

    @model_validator(mode="after")
    def _backend_fits(self) -> ProbeConfig:
        if self.backend == "gloo" and self.gpus is not None:
            raise ValueError("gloo runs on CPU processes: give --ranks, not --gpus")
        if self.backend == "nccl" and self.ranks is not None:
            raise ValueError("--ranks is for the CPU (gloo) mechanics only: pick GPUs with --gpus")
        return self

    def message_bytes(self, tokens: int) -> int:
        return int(allreduce_message_bytes(tokens, self.hidden))
