"""What physics leaves unexplained, fitted: the host overhead on a measured plain sweep and a drafter's cycle overhead
on a speculative sweep at one accept length, each a line in the stream count, with its largest miss."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from verifylab.model.pricing.pricer import Box, Overheads, price_cycle, price_pass, scenarios
from verifylab.vocab import Drafter


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
    work = [(ms, price_pass(box, box.target, c, c, s, decode=True)) for c, ms in plain]
    resid = [ms - w.physics_ms - w.collectives_ms for ms, w in work]
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
    resid = [accept * ms - price_cycle(box, probe, drafter, draft_tokens, c, s).total_ms for c, ms in spec]
    a, b = fit_linear([c for c, _ in spec], resid, [accept * ms for _, ms in spec])
    below = tuple(c for (c, _), r in zip(spec, resid, strict=True) if r < 0)
    return FitResult(a, b, tuple(resid), below, _miss(spec, resid, a, b, accept))


def _miss(points: Sequence[tuple[int, float]], resid: Sequence[float], a: float, b: float, scale: float) -> float:
    """The largest relative miss of ``a + b x`` on what it was fitted to (measured = ``scale`` x each point)."""
    return max(abs(a + b * c - r) / (scale * ms) for (c, ms), r in zip(points, resid, strict=True))
