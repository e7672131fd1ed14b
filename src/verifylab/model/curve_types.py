"""The values the regime prices are made of: a collective's price as a range with its sources, one source's
latency curve by message size, and the reader's own probed box (:mod:`verifylab.model.regimes` prices with them
and re-exports them)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from verifylab.model.comm_pass import loglog_interpolate
from verifylab.vocab import Regime


@dataclass(frozen=True)
class Price:
    """One collective's latency as a range (us), with where it came from."""

    low_us: float
    high_us: float
    basis: str

    def __post_init__(self) -> None:
        if self.low_us > self.high_us:
            low, high = self.high_us, self.low_us
            object.__setattr__(self, "low_us", low)
            object.__setattr__(self, "high_us", high)

    def scaled(self, factor_low: float, factor_high: float, why: str) -> Price:
        return Price(self.low_us * factor_low, self.high_us * factor_high, f"{self.basis}; {why}")


@dataclass(frozen=True)
class SourceCurve:
    """One source's measured points (bytes -> us) and the slope (us per byte) it grows by beyond them."""

    label: str
    message_bytes: tuple[float, ...]
    us: tuple[float, ...]
    public_rows: tuple[str, ...] = ()  # the public-evidence row ids it was built from (none: a measured run)

    def at(self, message: float, slope_us_per_byte: float) -> float:
        xs, ys = self.message_bytes, self.us
        if message <= xs[0]:
            return ys[0]  # below the smallest size measured: the latency floor of that size
        if message >= xs[-1]:
            return ys[-1] + (message - xs[-1]) * slope_us_per_byte
        return loglog_interpolate(xs, ys, message)


def monotone(us: list[float]) -> tuple[float, ...]:
    """A latency curve that never falls as the message grows: a point above a larger size's latency (an isolated
    spike, such as one source's own flagged outlier) is lowered to it."""
    out, lowest = [], math.inf
    for value in reversed(us):
        lowest = min(lowest, float(value))
        out.append(lowest)
    return tuple(reversed(out))


@dataclass(frozen=True)
class BoxProbe:
    """The reader's own box at the case study's TP size (a stored probe, or a curve file): its curves price the
    options; what it did not measure is priced in its regime, when its verdict gives one."""

    source: str  # "run <id>" or "file <path>"
    label: str
    regime: Regime  # the probe's verdict; UNKNOWN for a curve file (no verdict)
    nccl: SourceCurve
    fused: SourceCurve | None
