"""The fused all-reduce+norm kernel's cost inside a pass over its isolated latency, as a line in the log of its
message: fitted on every stored trace that measured it — the synthetic passes' (Kimi-K2's 122 all-reduces) and the
live SGLang TP-2 passes' (a random-weight model) — with each point's residual and its leave-one-out prediction.

The two sets differ in message size and in what surrounds the kernel; the fit cannot tell those apart and reads
the difference as one of size. Outside the sizes measured the factor is held at the nearest end, not extrapolated."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from verifylab.derived import derived
from verifylab.model.inputs.stored import StoredInputs, StoredRuns
from verifylab.model.inputs.traces import InPassPoint
from verifylab.model.pricing.collectives import RegimeCurves
from verifylab.model.pricing.regimes import AS_ISOLATED_WORDS


@dataclass(frozen=True)
class InPassFit:
    """factor = intercept + slope x ln(message bytes), held at the ends of the sizes fitted; ``spread`` is the
    largest relative residual of a fitted point, the range every price carries."""

    points: tuple[InPassPoint, ...]
    intercept: float
    slope: float
    spread: float

    def at(self, message_bytes: float) -> float:
        """The fitted factor at ``message_bytes`` (the nearest fitted size's outside them)."""
        if not self.points:
            return 1.0
        sizes = [p.message_bytes for p in self.points]
        x = math.log(min(max(message_bytes, min(sizes)), max(sizes)))
        return self.intercept + self.slope * x

    def range_at(self, message_bytes: float) -> tuple[float, float]:
        """(low, high): the fitted factor less and plus the fit's spread."""
        centre = self.at(message_bytes)
        return centre * (1 - self.spread), centre * (1 + self.spread)

    def source(self) -> str:
        """The runs fitted on, by kind (for an inputs table)."""
        if not self.points:
            return AS_ISOLATED_WORDS
        by_kind: dict[str, list[str]] = {}
        for p in self.points:
            by_kind.setdefault(p.kind, []).append(f"{p.run} ({p.message_bytes:,.0f} B)")
        fitted = "; ".join(f"{kind}: {', '.join(runs)}" for kind, runs in by_kind.items())
        return f"fitted on {len(self.points)} traces, ±{self.spread:.0%} — {fitted}"


def fit_in_pass(points: list[InPassPoint] | tuple[InPassPoint, ...]) -> InPassFit:
    """Least squares of the factor on ln(message bytes); one size measured: the mean (no slope); none: 1.0."""
    points = tuple(points)
    if not points:
        return InPassFit((), 1.0, 0.0, 0.0)
    xs = [math.log(p.message_bytes) for p in points]
    ys = [p.factor for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx > 0 else 0.0
    intercept = my - slope * mx
    spread = max(abs(y - (intercept + slope * x)) / (intercept + slope * x) for x, y in zip(xs, ys, strict=True))
    return InPassFit(points, intercept, slope, spread)


@derived
def fused_in_pass_fit(runs: StoredRuns, leave_out: str | None = None) -> InPassFit:
    """The fit over every stored trace (``leave_out``: without that run's points, to predict it out of sample)."""
    return fit_in_pass([p for p in runs.in_pass_points if p.run != leave_out])


def in_pass_fit_table(runs: StoredRuns) -> pd.DataFrame:
    """Each fitted point: measured factor, the fit's value at its size, and the value a fit without its run predicts."""
    fit = fused_in_pass_fit(runs)
    rows = []
    for p in fit.points:
        rows.append(
            {
                "run": p.run,
                "pass": p.kind,
                "message_bytes": int(p.message_bytes),
                "measured": p.factor,
                "fitted": fit.at(p.message_bytes),
                "left_out": fused_in_pass_fit(runs, leave_out=p.run).at(p.message_bytes),
            }
        )
    return pd.DataFrame(rows)


def pass_factors(runs: StoredRuns, path: str, message_bytes: float) -> dict[str, float]:
    """Each implementation's cost inside a pass on ``path`` over its isolated latency: NCCL's from the synthetic
    traces of that path, the fused kernel's from the fit at ``message_bytes``."""
    factors = {impl: f for (where, impl), f in runs.in_pass_factors().items() if where == path and impl != "fused"}
    fit = fused_in_pass_fit(runs)
    if fit.points:
        factors["fused"] = fit.at(message_bytes)
    return factors


@dataclass(frozen=True, eq=False)
class InPassFitOf:
    """The fused kernel's in-pass fit of a record, fitted on the first price that asks for it: an answer that prices
    no fused kernel never reads the traces."""

    runs: StoredRuns

    def range_at(self, message_bytes: float) -> tuple[float, float]:
        return fused_in_pass_fit(self.runs).range_at(message_bytes)

    def source(self) -> str:
        return fused_in_pass_fit(self.runs).source()


def regime_curves(stored: StoredInputs, reported: tuple[float, float, float] | None = None) -> RegimeCurves:
    """The curves of one evidence's record (public table, measured runs) and the reported regime's range."""
    host, host_run = stored.runs.host_memory
    return RegimeCurves(stored.public, host, host_run, reported, InPassFitOf(stored.runs), stored.runs.probe)
