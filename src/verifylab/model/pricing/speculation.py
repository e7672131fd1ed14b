"""Speculative decoding under load, modelled for any model config and GPU: plain decoding's step and a speculative
cycle at C streams priced by :mod:`verifylab.model.pricer`, the gain (accept length x step / cycle), the stream
counts where it crosses 1, and the fits of what physics leaves unexplained (host and drafter overheads).

A speculative cycle with a chain of K draft tokens is one forward pass of C x K tokens, K - 1 draft-model steps
(physics and the draft's own all-reduces; none for an n-gram drafter) and the drafter's overhead per cycle,
cycle0 + cycle1 x C, fitted on one accept length of a measured speculative sweep. The cost side does not depend on
the accept length A (every verify processes every draft token), so the model predicts every other accept length,
and other chain lengths, out of sample.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise, product

from verifylab.errors import ModelInputError
from verifylab.model.pricing.attention import streams_held
from verifylab.model.pricing.boxes import Calibrated
from verifylab.model.pricing.pass_cost import compare
from verifylab.model.pricing.pricer import Box, Overheads, price_cycle, price_step, scenarios
from verifylab.span import Span
from verifylab.vocab import Drafter

UNPHYSICAL = (
    "unphysical: above the accept length, so a cycle cost less than a plain step, which no real engine's does; check "
    "the accept length the server reports, that plain decoding ran at the same load, and whether the draft's tokens "
    "route as a trained model's would (random weights replay them)"
)


def gain_flag(gain: float, accept: float) -> str:
    """:data:`UNPHYSICAL` where a speculative gain (or an end of its range) exceeds its accept length, else ''."""
    return UNPHYSICAL if gain > accept + 1e-9 else ""


@dataclass(frozen=True)
class GainRow:
    streams: int
    plain_tokens_per_s: Span  # all streams
    spec_tokens_per_s: Span
    gain: Span

    def as_row(self) -> dict[str, float]:
        """The row's ranges as flat columns (``*_low``, ``*_high``), as tables and JSON carry them."""
        return {
            "streams": self.streams,
            "plain_tokens_per_s_low": self.plain_tokens_per_s.low,
            "plain_tokens_per_s_high": self.plain_tokens_per_s.high,
            "spec_tokens_per_s_low": self.spec_tokens_per_s.low,
            "spec_tokens_per_s_high": self.spec_tokens_per_s.high,
            "gain_low": self.gain.low,
            "gain_high": self.gain.high,
        }


def check_accept(accept: float, draft_tokens: int) -> None:
    """Refuse an accept length no chain of ``draft_tokens`` can yield (each verify accepts 1 to that many)."""
    if not 1.0 <= accept <= draft_tokens:
        raise ModelInputError(f"accept length {accept:g} must lie in 1..{draft_tokens} (the chain's draft tokens)")


def gains(
    box: Box, ov: Overheads, drafter: Drafter, accept: float, draft_tokens: int, streams: Sequence[int]
) -> list[GainRow]:
    """Plain and speculative tok/s and the gain at each stream count, each a range over every end of every input
    range taken together (a scenario prices both sides the same way)."""
    check_accept(accept, draft_tokens)
    pools = box.pools()
    rows = []
    for c in streams:
        plain, spec, gain = [], [], []
        ends = ("low",) if ov.decode_ms is not None or ov.host0_ms.low == ov.host0_ms.high else ("low", "high")
        held_plain = c if pools is None else min(c, streams_held(pools[0], box.context))  # the rest queue
        held_spec = c if pools is None else min(c, streams_held(pools[1], box.context))
        if min(held_plain, held_spec) < 1:
            raise ModelInputError(
                f"the KV pool holds no stream of {box.context:,.0f} tokens ({pools[0] if pools else 0:,} tokens per "
                f"GPU without the draft, {pools[1] if pools else 0:,} with it): shorten the context or raise --tp"
            )
        for s, host in product(scenarios(box), ends):
            step = price_step(box, ov, held_plain, s, host)
            cycle = price_cycle(box, ov, drafter, draft_tokens, held_spec, s, host)
            plain.append(held_plain * 1e3 / step.total_ms)
            spec.append(held_spec * accept * 1e3 / cycle.total_ms)
            gain.append(compare(step, cycle, yield_ratio=accept * held_spec / held_plain).speedup)
        m, h, d = ov.margin(drafter), ov.host_miss, ov.cycle_miss.get(drafter, ov.host_miss)
        rows.append(
            GainRow(
                c,
                Span(min(plain) * (1 - h), max(plain) * (1 + h)),
                Span(min(spec) * (1 - d), max(spec) * (1 + d)),  # its fit's miss holds the host fit's inside it
                Span(min(gain) * (1 - m), max(gain) * (1 + m)),
            )
        )
    return rows


def crossover_streams(points: Sequence[tuple[float, float]]) -> float | None:
    """Where a gain curve ``[(streams, gain), ...]`` first falls below 1, interpolated in log2(streams); the first
    stream count when it never reaches 1; None when it never falls below 1."""
    pts = sorted(points)
    if not pts:
        return None
    if pts[0][1] < 1.0:
        return pts[0][0]
    for (c0, g0), (c1, g1) in pairwise(pts):
        if g1 < 1.0 <= g0:
            x0, x1 = math.log2(c0), math.log2(c1)
            return 2 ** (x0 + (g0 - 1.0) / (g0 - g1) * (x1 - x0))
    return None


def crossings(points: Sequence[tuple[float, float]]) -> list[tuple[float, str]]:
    """Every stream count where a gain curve ``[(streams, gain), ...]`` crosses 1, interpolated in log2(streams),
    with its direction: ``"stops"`` (falls below 1) or ``"pays"`` (rises to 1 or above again). A curve that starts
    below 1 gives ``(first streams, "stops")`` first."""
    pts = sorted(points)
    out: list[tuple[float, str]] = []
    if pts and pts[0][1] < 1.0:
        out.append((pts[0][0], "stops"))
    for (c0, g0), (c1, g1) in pairwise(pts):
        if (g0 >= 1.0) == (g1 >= 1.0):
            continue
        x0, x1 = math.log2(c0), math.log2(c1)
        at = 2 ** (x0 + (g0 - 1.0) / (g0 - g1) * (x1 - x0))
        out.append((at, "stops" if g1 < 1.0 else "pays"))
    return out


def paying_streams(rows: Sequence[GainRow], end: str = "low") -> list[int]:
    """The stream counts of ``rows`` where the gain's ``end`` ("low": pessimistic, "high") is at least 1."""
    return [r.streams for r in rows if (r.gain.low if end == "low" else r.gain.high) >= 1.0]


def crossover_range(rows: Sequence[GainRow]) -> tuple[float | None, float | None]:
    """The crossover of the pessimistic (low) and optimistic (high) gain curves: (low, high); None: beyond the
    largest stream count given."""
    low = crossover_streams([(r.streams, r.gain.low) for r in rows])
    high = crossover_streams([(r.streams, r.gain.high) for r in rows])
    return low, high


DEFAULT_STREAMS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)


@dataclass(frozen=True)
class SpeculationAnswer:
    """One box's answer: the rows, where the gain falls below 1, and what every input was."""

    rows: list[GainRow]
    crossover: tuple[float | None, float | None]
    inputs: dict[str, str]
    stream_cap: int | None = None  # distinct streams of the context the KV pool holds (None: not applied)


def pool_words(box: Box) -> str:
    """The KV pool a box prices, in words (or that it prices none)."""
    pools = box.pools()
    if pools is None:
        return "not priced (every stream runs at once)"
    plain, spec = pools
    return (
        f"{plain:,} tokens per GPU without the draft, {spec:,} with it, at {box.mem_fraction:g} of each GPU's memory: "
        f"{streams_held(plain, box.context)} and {streams_held(spec, box.context)} streams of {box.context:g} tokens "
        "run at once, the rest queue"
    )


def answer(
    box: Box, calibrated: Calibrated, drafter: Drafter, accept: float, draft_tokens: int, streams=DEFAULT_STREAMS
) -> SpeculationAnswer:
    rows = gains(box, calibrated.overheads, drafter, accept, draft_tokens, streams)
    inputs = {
        "model": box.target.name,
        "draft": box.draft.name if box.draft is not None else "none (n-gram)",
        "gpu": f"{box.gpu.name}: {box.gpu.bandwidth_gbs.text(0)} GB/s, {box.gpu.tflops.text(0)} TFLOP/s "
        f"({box.gpu.source})",
        "tp": str(box.tp),
        "routing": box.routing.value,
        "routing_overlap": f"{box.chain_overlap.text(2)} (0: each token of a verify chain draws its own experts; "
        "1: the chain reads one token's)",
        "context_tokens": f"{box.context:g}",
        "kv_pool": pool_words(box),
        "attention": box.attention.words(),
        "allreduce": box.comm_source,
        "host_overhead": calibrated.host_note,
        "drafter_overhead": f"{drafter.value}: fitted on a measured speculation grid ({calibrated.overheads.source})",
    }
    return SpeculationAnswer(rows, crossover_range(rows), inputs)


def combined_crossover(answers: Iterable[SpeculationAnswer]) -> tuple[float | None, float | None]:
    """Several answers' crossovers as one range: the earliest any pessimistic curve falls below 1, the latest any
    optimistic one does (None: one of them never does within the streams priced)."""
    crossovers = [a.crossover for a in answers]
    lows = [low for low, _ in crossovers if low is not None]
    highs = [high for _, high in crossovers]
    return (min(lows) if lows else None, None if None in highs else max(h for h in highs if h is not None))
