"""The communication regimes and the collectives priced in them, as values: which regimes the model prices and what it
calls them, the regime plain decoding runs in, each collective, a price as a range with its basis, FlashInfer's
one-shot size rule, SGLang's PCIe-IPC workspace, and the factor a push kernel costs inside a pass over its isolated
latency."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from verifylab.vocab import Regime

# Rows of the hidden size PCIe-IPC's workspace holds where SGLang cannot read the server's decode config (0.5.22's
# _FALLBACK_DECODE_WIDTH; a server's own is its decode CUDA graph's largest batch x draft tokens): a reduction past it
# is handed to NCCL
PCIE_IPC_WORKSPACE_ROWS = 64


def pcie_ipc_holds(message: float, hidden: int) -> bool:
    """Whether PCIe-IPC's workspace holds a reduction of ``message`` bytes of a model of ``hidden`` size (bf16
    rows); SGLang hands a larger one to NCCL (``should_pcie_ipc_ar``)."""
    return message <= PCIE_IPC_WORKSPACE_ROWS * hidden * 2


PRICED_REGIMES = (Regime.HEALTHY_P2P, Regime.HOST_MEMORY, Regime.DEGRADED)


REGIME_TITLE = {
    Regime.HEALTHY_P2P: "healthy P2P",
    Regime.HOST_MEMORY: "host-memory fallback",
    Regime.DEGRADED: "as reported (broken P2P)",
    Regime.NCCL_SLOW: "NCCL slow, P2P works",
    Regime.MEASURED: "this box (probe)",
}


def decode_regime(regime: Regime) -> Regime:
    """The regime plain decoding runs in. On the case study's box decoding reached 92.6 tok/s, which bounds its
    all-reduces to the decode bound (under 90 us) whatever the verify pass's cost: the anomaly belongs to the
    verify pass, so its decoding is priced as healthy P2P."""
    if regime is Regime.DEGRADED:
        return Regime.HEALTHY_P2P
    return regime


class Collective(StrEnum):
    NCCL = "NCCL ring all-reduce"
    FUSED = "FlashInfer fused all-reduce + RMSNorm"
    PCIE_IPC = "FlashInfer PCIe-IPC all-reduce"
    ALL_TO_ALL = "all-to-all (dispatch or combine)"
    SEND = "pipeline send"


@dataclass(frozen=True)
class Price:
    """One collective's latency as a range (us), with where it came from; ``in_pass`` the factor a push kernel costs
    inside a pass over its isolated latency (its own term: 1 where none applies), and ``extrapolated`` how far the
    message lies outside every size its sources measured ("" within them)."""

    low_us: float
    high_us: float
    basis: str
    in_pass: tuple[float, float] = (1.0, 1.0)
    extrapolated: str = ""

    @property
    def alone_us(self) -> tuple[float, float]:
        """The collective by itself, as its sources measured it: the range without the in-pass factor."""
        return self.low_us / self.in_pass[0], self.high_us / self.in_pass[1]

    def __post_init__(self) -> None:
        if self.low_us > self.high_us:
            low, high = self.high_us, self.low_us
            object.__setattr__(self, "low_us", low)
            object.__setattr__(self, "high_us", high)

    def scaled(self, factor_low: float, factor_high: float, why: str) -> Price:
        """This price inside a pass: the in-pass factor applied as its own term, with ``why`` (its evidence)."""
        factor = (self.in_pass[0] * factor_low, self.in_pass[1] * factor_high)
        return Price(
            self.low_us * factor_low, self.high_us * factor_high, f"{self.basis}; {why}", factor, self.extrapolated
        )


def extrapolation(sizes: list[tuple[float, ...]], message: float) -> str:
    """How far ``message`` lies outside every source's measured sizes, in words ("" where a source measured around
    it): past the largest, the bandwidth term carries it; below the smallest, the smallest size's latency holds."""
    if not sizes or any(xs[0] <= message <= xs[-1] for xs in sizes):
        return ""
    largest, smallest = max(xs[-1] for xs in sizes), min(xs[0] for xs in sizes)
    if message > largest:
        return f"extrapolated {message / largest:.1f}x past the largest size measured ({largest / 1024:.0f} KiB)"
    if message < smallest:
        return f"held at the smallest size measured ({smallest / 1024:.0f} KiB, {smallest / message:.1f}x the message)"
    below = max(xs[-1] for xs in sizes if xs[-1] < message)
    above = min(xs[0] for xs in sizes if xs[0] > message)
    return f"extrapolated between two sources' sizes ({below / 1024:.0f} and {above / 1024:.0f} KiB)"


ONESHOT_MAX_BYTES = {2: 512 << 20, 4: 64 << 20, 8: 42 << 20}  # FlashInfer _should_use_oneshot thresholds


def uses_oneshot(tokens: int, hidden: int, ranks: int, itemsize: int = 2) -> bool:
    """FlashInfer's size rule: one-shot while tokens x hidden x 2 x ranks x itemsize <= threshold."""
    threshold = ONESHOT_MAX_BYTES.get(ranks)
    if threshold is None:
        return False
    return tokens * hidden * 2 * ranks * itemsize <= threshold


def max_oneshot_tokens(hidden: int, ranks: int, itemsize: int = 2) -> int:
    """Largest token count that keeps FlashInfer on one-shot (TP 8, hidden 7168: 192)."""
    return ONESHOT_MAX_BYTES[ranks] // (hidden * 2 * ranks * itemsize)


AS_ISOLATED_WORDS = "no trace of a fused pass: isolated latency used"


class InPassFactor(Protocol):
    """What a push kernel costs inside a pass over its isolated latency at a message (low, high): a fit of the stored
    traces (:class:`verifylab.model.fits.in_pass.InPassFit`), or :data:`AS_ISOLATED`."""

    def range_at(self, message_bytes: float) -> tuple[float, float]: ...

    def source(self) -> str:
        """What the factor was fitted on, for an inputs table."""
        ...


class _AsIsolated:
    """No trace measured the kernel inside a pass: its isolated latency is its price."""

    def range_at(self, message_bytes: float) -> tuple[float, float]:
        return 1.0, 1.0

    def source(self) -> str:
        return AS_ISOLATED_WORDS


AS_ISOLATED: InPassFactor = _AsIsolated()
