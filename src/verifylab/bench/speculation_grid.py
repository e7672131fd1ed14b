"""What a speculation-under-load grid is: the drafters, draft tokens per verify and accept lengths (each a server
whose mean accept length SGLang itself holds, ``SGLANG_SIMULATE_ACC_LEN``), the stream counts each is swept over.
Plain data (a chapter's parameter); ``bench.speculation`` runs it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from verifylab.server.variants import Variant
from verifylab.vocab import Drafter

SIMULATE_VAR = "SGLANG_SIMULATE_ACC_LEN"  # read by SGLang's speculative/spec_utils.py at import (0.5.9, 0.5.17)
# "fixed": every accepted token is id 100 (streams repeat one token: a random router collapses onto few experts);
# "real-draft-token": the draft's own tokens are accepted and the bonus token is the target's (read by 0.5.17)
TOKEN_MODE_VAR = "SGLANG_SIMULATE_ACC_TOKEN_MODE"
TokenMode = Literal["fixed", "real-draft-token"]


@dataclass(frozen=True)
class SpecPoint:
    """One server of the grid: plain decoding (``drafter`` None) or a drafter at ``draft_tokens`` per verify with
    the mean accept length fixed at ``accept_length``."""

    drafter: Drafter | None = None
    draft_tokens: int | None = None
    accept_length: float | None = None
    token_mode: TokenMode = "fixed"
    max_running: int | None = None  # --max-running-requests of this server (None: the base's)
    hold_accept: bool = True  # SGLang holds the accept length (random weights); False: the traffic's own
    pcie_ipc: bool = False  # SGLang's PCIe-IPC all-reduce (a box plan's, where it priced it)
    cuda_graph_max_bs: int | None = None  # decode CUDA graphs up to this batch (a box plan's cap; None: SGLang's own)
    fusion: bool = False  # FlashInfer's fused all-reduce + RMSNorm (a box plan's, where it priced it)

    @property
    def name(self) -> str:
        """The run's key for this server's tables (the typed fields are stored beside it)."""
        cap = ("" if self.max_running is None else f"_m{self.max_running}") + ("_pcie_ipc" if self.pcie_ipc else "")
        cap += "_fused" if self.fusion else ""
        if self.drafter is None:
            return "plain" + cap
        return f"{self.drafter.value}_d{self.draft_tokens}_a{self.accept_length:.2f}".replace(".", "p") + cap

    def variant(self) -> Variant:
        """This server as a variant: its drafter's chain (an n-gram chain one candidate wide), its cap, its held
        accept length."""
        if self.drafter is None:
            return Variant(
                name=self.name,
                max_running=self.max_running,
                pcie_ipc=self.pcie_ipc,
                cuda_graph_max_bs=self.cuda_graph_max_bs,
                fusion=self.fusion,
            )
        held = {SIMULATE_VAR: f"{self.accept_length:g}", TOKEN_MODE_VAR: self.token_mode} if self.hold_accept else {}
        return Variant(
            name=self.name,
            speculative=self.drafter.algorithm,
            draft_tokens=self.draft_tokens,
            max_running=self.max_running,
            env=held,
            pcie_ipc=self.pcie_ipc,
            cuda_graph_max_bs=self.cuda_graph_max_bs,
            fusion=self.fusion,
        )


class SpeculationGrid(BaseModel):
    """Which servers the experiment starts and the load each is swept over."""

    model_config = ConfigDict(extra="forbid")

    drafters: list[Drafter] = Field(
        default_factory=lambda: [Drafter.EAGLE3, Drafter.NGRAM], min_length=1, description="drafters measured"
    )
    accept_lengths: list[float] = Field(
        default_factory=lambda: [1.5, 2.0, 3.0], min_length=1, description="mean accept lengths SGLang is made to hold"
    )
    draft_tokens: list[int] = Field(
        default_factory=lambda: [4], min_length=1, description="tokens per verify of each chain (root included)"
    )
    concurrency: list[PositiveInt] = Field(
        default_factory=lambda: [1, 2, 4, 8, 16, 32, 64, 128], min_length=1, description="streams of each sweep"
    )
    tokens: PositiveInt = Field(128, description="output tokens per request")
    requests_per_cell: PositiveInt | None = Field(None, description="requests per cell (default max(2 C, 8))")
    plain: bool = Field(True, description="also sweep plain decoding (the gain's denominator)")
    temperature: float = Field(
        0.0, ge=0.0, le=2.0, description="every request's sampling temperature (> 0: streams diverge, experts spread)"
    )
    token_mode: TokenMode = Field(
        "fixed",
        description="tokens a speculative server accepts: 'fixed' (id 100, a random router collapses) or "
        "'real-draft-token' (the draft's own; with temperature > 0 the experts spread)",
    )

    @property
    def spreads_experts(self) -> bool:
        """Whether the served tokens diverge, so that a random router spreads them over the experts as a trained
        one does: requests sampled at a temperature > 0 and speculative servers accepting the draft's own tokens."""
        return self.temperature > 0 and self.token_mode == "real-draft-token"

    @field_validator("accept_lengths")
    @classmethod
    def _accept_lengths(cls, value: list[float]) -> list[float]:
        bad = [a for a in value if not 1.0 <= a < 1e3]
        if bad:
            raise ValueError(f"accept lengths {bad} are impossible: each verify yields at least 1 token")
        return value

    @field_validator("draft_tokens")
    @classmethod
    def _draft_tokens(cls, value: list[int]) -> list[int]:
        bad = [k for k in value if not 2 <= k <= 64]
        if bad:
            raise ValueError(f"draft tokens {bad}: a chain verifies 2 to 64 tokens (the root and 1+ drafts)")
        return value

    @model_validator(mode="after")
    def _reachable(self) -> SpeculationGrid:
        longest = max(self.draft_tokens)
        if max(self.accept_lengths) > longest:
            raise ValueError(
                f"accept length {max(self.accept_lengths):g} exceeds the longest chain ({longest} draft tokens): "
                "a verify accepts at most its draft tokens"
            )
        return self

    def points(self) -> list[SpecPoint]:
        """Every server of the grid (a chain shorter than an accept length is skipped: it cannot reach it)."""
        spec = [
            SpecPoint(drafter, k, a, self.token_mode)
            for drafter in self.drafters
            for k in self.draft_tokens
            for a in self.accept_lengths
            if a <= k
        ]
        return ([SpecPoint()] if self.plain else []) + spec
