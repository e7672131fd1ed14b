"""A priced forward pass as one record of named terms, and the one comparison of two: every saving, loss or speedup
the book or the command line shows (fusion, a collective swapped, elimination, speculation) is :func:`compare` of two
:class:`PassCost` records, and no module outside this one subtracts priced times (``tests/test_one_pricer.py``).

A pass's terms, each in ms: what the busiest GPU reads over its effective bandwidth (``memory_ms``, and the same bytes
by part: weights, routed experts, KV), its arithmetic over the effective matrix rate, a part measured rather than
priced (a compute-only pass), its collectives, the host overhead per pass and per stream, and for a speculative cycle
the draft model's steps and the drafter's overhead per cycle and per stream. ``total_ms`` adds them in one order."""

from __future__ import annotations

from dataclasses import dataclass, replace

TERMS = (
    "memory_ms",
    "arithmetic_ms",
    "measured_ms",
    "collectives_ms",
    "host_pass_ms",
    "host_streams_ms",
    "draft_steps_ms",
    "drafter_cycle_ms",
    "drafter_streams_ms",
)  # the terms total_ms adds, in its order


@dataclass(frozen=True)
class PassCost:
    """One pass (or a speculative cycle) of ``tokens`` tokens from ``streams`` streams, in one scenario, by term (ms).
    ``weights_ms``, ``experts_ms`` and ``kv_ms`` split ``memory_ms`` by what is read (they add up to it to rounding);
    ``collective`` names what the collectives are."""

    tokens: float
    streams: float
    memory_ms: float = 0.0
    arithmetic_ms: float = 0.0
    measured_ms: float = 0.0
    collectives_ms: float = 0.0
    host_pass_ms: float = 0.0
    host_streams_ms: float = 0.0
    draft_steps_ms: float = 0.0
    drafter_cycle_ms: float = 0.0
    drafter_streams_ms: float = 0.0
    weights_ms: float = 0.0
    experts_ms: float = 0.0
    kv_ms: float = 0.0
    collective: str = ""

    @property
    def physics_ms(self) -> float:
        """The GPU's own work: its bytes over the bandwidth and its arithmetic over the matrix rate."""
        return self.memory_ms + self.arithmetic_ms

    @property
    def host_ms(self) -> float:
        """What the GPU's work does not explain: per pass, and per stream times the streams."""
        return self.host_pass_ms + self.host_streams_ms

    @property
    def total_ms(self) -> float:
        """Every term, added in :data:`TERMS`' order (the order the pricer has always added them in)."""
        work = self.memory_ms + self.arithmetic_ms + self.measured_ms + self.collectives_ms
        host = work + self.host_pass_ms + self.host_streams_ms
        return host + self.draft_steps_ms + self.drafter_cycle_ms + self.drafter_streams_ms

    def terms(self) -> dict[str, float]:
        """The named terms (ms), the parts of ``memory_ms`` in place of it."""
        parts = ("weights_ms", "experts_ms", "kv_ms")
        named = {n: getattr(self, n) for n in (*parts, *TERMS) if n != "memory_ms"}
        return {n.removesuffix("_ms"): v for n, v in named.items()}

    def with_collectives(self, collectives_ms: float, collective: str) -> PassCost:
        """The same pass with its collectives swapped for ``collective`` at ``collectives_ms`` (a collective that
        costs what the other did not: everything else as it was)."""
        return replace(self, collectives_ms=collectives_ms, collective=collective)


@dataclass(frozen=True)
class Comparison:
    """``after`` against ``before``: the time it saves (ms; negative: it costs more), term by term and in all, and its
    speedup when it yields ``yield_ratio`` times the tokens ``before`` does (a speculative cycle's accept length)."""

    saved_ms: float
    by_term: dict[str, float]
    speedup: float


def compare(before: PassCost, after: PassCost, yield_ratio: float = 1.0) -> Comparison:
    """The one comparison of two priced passes: ``before``'s total less ``after``'s, each term's difference, and the
    ratio of their token rates (``yield_ratio`` x before / after)."""
    by_term = {name: getattr(before, name) - getattr(after, name) for name in TERMS}  # PassCost's order of them
    before_ms, after_ms = before.total_ms, after.total_ms
    return Comparison(before_ms - after_ms, by_term, yield_ratio * before_ms / after_ms)
