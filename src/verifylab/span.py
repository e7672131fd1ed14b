"""A value known to lie in a range, and the arithmetic of ranges: the ground floor every reported, measured, fitted
or priced number of verifylab stands on."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A value known to lie between ``low`` and ``high`` (equal when it is known)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if self.low > self.high:
            low, high = self.high, self.low
            object.__setattr__(self, "low", low)
            object.__setattr__(self, "high", high)

    @classmethod
    def of(cls, *values: float) -> Span:
        return cls(min(values), max(values))

    @property
    def mid(self) -> float:
        return (self.low + self.high) / 2

    def gain_text(self, digits: int = 1, unit: str = "ms") -> str:
        """A saving that may be negative, in words: ``a gain of 0.5-1.0 ms``, ``a loss of 0.5-1.0 ms``, or
        ``anything from a 3.8 ms loss to a 1.3 ms gain``."""
        if self.low >= 0:
            return f"a gain of {self.text(digits, unit)}"
        if self.high <= 0:
            return f"a loss of {Span(-self.high, -self.low).text(digits, unit)}"
        return f"anything from a {-self.low:.{digits}f} {unit} loss to a {self.high:.{digits}f} {unit} gain"

    def text(self, digits: int = 1, unit: str = "") -> str:
        """``13.5-16.2 ms``, or ``204.9 µs`` when both ends agree at that precision."""
        low, high = f"{self.low:.{digits}f}", f"{self.high:.{digits}f}"
        number = low if low == high else f"{low}-{high}"
        return f"{number} {unit}".strip()


def times(gain: Span, rate: Span) -> Span:
    """A rate scaled by a gain end by end (low by low, high by high): the speculative rate every page shows, whose
    ratio to the plain rate beside it is the gain beside it."""
    return Span(gain.low * rate.low, gain.high * rate.high)


TIE_MARGIN = 0.02  # one range is decided beyond another only when it is at least this much beyond it at both ends


def decided_faster(first: Span, runner: Span) -> bool:
    """Whether the time ``first`` is below ``runner`` by :data:`TIE_MARGIN` at both ends: ranges of the same inputs'
    ends are compared end by end (as fusion's saving is), not by overlap."""
    return first.low <= runner.low * (1 - TIE_MARGIN) and first.high <= runner.high * (1 - TIE_MARGIN)


def decided_more(first: Span, runner: Span) -> bool:
    """Whether the rate ``first`` is above ``runner`` by :data:`TIE_MARGIN` at both ends (end by end, as above); two
    ends at 0 are a tie."""
    return all(a > b and a >= b * (1 + TIE_MARGIN) for a, b in ((first.low, runner.low), (first.high, runner.high)))
