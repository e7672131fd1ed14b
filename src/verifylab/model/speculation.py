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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise, product

import numpy as np

from verifylab.errors import ModelInputError
from verifylab.model.cycle import Span
from verifylab.model.gpus import DATASHEETS as DATASHEETS
from verifylab.model.gpus import Ceilings as Ceilings
from verifylab.model.gpus import Gpu as Gpu
from verifylab.model.gpus import gpu_named as gpu_named
from verifylab.model.pricer import NO_OVERLAP as NO_OVERLAP
from verifylab.model.pricer import AllreduceCurve as AllreduceCurve
from verifylab.model.pricer import Box as Box
from verifylab.model.pricer import Overheads as Overheads
from verifylab.model.pricer import Scenario as Scenario
from verifylab.model.pricer import comm_ms as comm_ms
from verifylab.model.pricer import cycle_ms as cycle_ms
from verifylab.model.pricer import host0_ms as host0_ms
from verifylab.model.pricer import physics_ms as physics_ms
from verifylab.model.pricer import scenarios as scenarios
from verifylab.model.pricer import step_ms as step_ms
from verifylab.model.pricer import verify_ms as verify_ms
from verifylab.vocab import Drafter


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


def gains(
    box: Box, ov: Overheads, drafter: Drafter, accept: float, draft_tokens: int, streams: Sequence[int]
) -> list[GainRow]:
    """Plain and speculative tok/s and the gain at each stream count, each a range over every end of every input
    range taken together (a scenario prices both sides the same way)."""
    if not 1.0 <= accept <= draft_tokens:
        raise ModelInputError(f"accept length {accept:g} must lie in 1..{draft_tokens} (the chain's draft tokens)")
    rows = []
    for c in streams:
        plain, spec, gain = [], [], []
        ends = ("low",) if ov.decode_ms is not None or ov.host0_ms.low == ov.host0_ms.high else ("low", "high")
        for s, host in product(scenarios(box), ends):
            t_step, t_cycle = step_ms(box, ov, c, s, host), cycle_ms(box, ov, drafter, draft_tokens, c, s, host)
            plain.append(c * 1e3 / t_step)
            spec.append(c * accept * 1e3 / t_cycle)
            gain.append(accept * t_step / t_cycle)
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


# ------------------------------------------------------------------------------------------------- fitting
@dataclass(frozen=True)
class FitResult:
    """A linear fit of what physics leaves unexplained, ``a + b x streams``, and how well it holds."""

    intercept_ms: float
    per_stream_ms: float
    residual_ms: tuple[float, ...]  # measured - physics at each point (what was fitted)
    below_physics: tuple[int, ...]  # stream counts where the measurement is faster than physics allows
    relative_miss: float  # the fit's largest |fitted - measured| / measured over its points


def fit_linear(
    streams: Sequence[float], unexplained_ms: Sequence[float], measured_ms: Sequence[float]
) -> tuple[float, float]:
    """Least squares ``a + b x`` of what physics leaves unexplained, each point weighted by 1 / its measured total
    (relative errors: a gain is a ratio, so 1 stream counts as much as 128), with b >= 0 (more streams never make
    a pass cheaper)."""
    x, y = np.asarray(streams, dtype=float), np.asarray(unexplained_ms, dtype=float)
    w = 1.0 / np.asarray(measured_ms, dtype=float)
    if len(x) < 2:
        return float(y.mean()), 0.0
    b, a = np.polyfit(x, y, 1, w=w)
    if b < 0:
        return float(np.average(y, weights=w**2)), 0.0
    return float(a), float(b)


def fit_host(box: Box, plain: Sequence[tuple[int, float]]) -> FitResult:
    """host0 + host1 x C from a measured plain sweep ``[(streams, step ms), ...]`` (physics and comm at their
    point values; a measurement faster than physics is listed: the box reads fewer bytes than it is said to)."""
    s = scenarios(box)[0]
    resid = [ms - physics_ms(box, box.target, c, c, s) - comm_ms(box, box.target, c, s, True) for c, ms in plain]
    a, b = fit_linear([c for c, _ in plain], resid, [ms for _, ms in plain])
    below = tuple(c for (c, _), r in zip(plain, resid, strict=True) if r < 0)
    return FitResult(a, b, tuple(resid), below, _miss(plain, resid, a, b, 1.0))


def fit_cycle(
    box: Box, host: Overheads, drafter: Drafter, draft_tokens: int, accept: float, spec: Sequence[tuple[int, float]]
) -> FitResult:
    """cycle0 + cycle1 x C from a measured speculative sweep ``[(streams, ms per token), ...]`` at one accept
    length (a cycle is accept x ms per token)."""
    s = scenarios(box)[0]
    probe = replace(host, cycle={**host.cycle, drafter: (0.0, 0.0)})
    resid = [accept * ms - cycle_ms(box, probe, drafter, draft_tokens, c, s) for c, ms in spec]
    a, b = fit_linear([c for c, _ in spec], resid, [accept * ms for _, ms in spec])
    below = tuple(c for (c, _), r in zip(spec, resid, strict=True) if r < 0)
    return FitResult(a, b, tuple(resid), below, _miss(spec, resid, a, b, accept))


def _miss(points: Sequence[tuple[int, float]], resid: Sequence[float], a: float, b: float, scale: float) -> float:
    """The largest relative miss of ``a + b x`` on what it was fitted to (measured = ``scale`` x each point)."""
    return max(abs(a + b * c - r) / (scale * ms) for (c, ms), r in zip(points, resid, strict=True))
