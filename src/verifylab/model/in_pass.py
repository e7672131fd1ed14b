"""The fused all-reduce+norm kernel's cost inside a pass over its isolated latency, as a line in the log of its
message: fitted on every stored trace that measured it — the synthetic passes' (Kimi-K2's 122 all-reduces) and the
live SGLang TP-2 passes' (a random-weight model) — with each point's residual and its leave-one-out prediction.

The two sets differ in message size and in what surrounds the kernel; the fit cannot tell those apart and reads
the difference as one of size. Outside the sizes measured the factor is held at the nearest end, not extrapolated."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from verifylab.derived import derived
from verifylab.model.comm_pass import in_pass_factors, load_curves
from verifylab.sources import COMM_CAMPAIGN_TABLES, MeasuredRuns
from verifylab.vocab import KIMI_K2_ALLREDUCES_PER_PASS

LIVE_PATH = "nvlink"  # the live TP-2 runs' GPUs talk over NVLink, as the campaign's nvlink curves were measured
SYNTHETIC = "synthetic pass"
LIVE = "live SGLang pass"


class PassBusy(NamedTuple):
    """One variant's target passes on the rank that waits least."""

    comm_us: float  # all-reduce transfer time per pass (median)
    norm_us: float  # norm kernels per pass (median)
    allreduces: int
    fused: int  # how many of them ran FlashInfer's fused kernel
    message_bytes: float

    @property
    def call_us(self) -> float:
        """One all-reduce inside the pass (µs)."""
        return self.comm_us / self.allreduces

    @property
    def norm_call_us(self) -> float:
        """One norm kernel inside the pass (µs)."""
        return self.norm_us / self.allreduces


def pass_busy(steps: pd.DataFrame, variant: str) -> PassBusy | None:
    """A variant's :class:`PassBusy` from a run's ``trace_steps`` (None: the run has no target pass of it)."""
    if "variant" not in steps.columns:
        return None
    rows = steps[(steps["phase"] == "target") & (steps["variant"] == variant)]
    if rows.empty:
        return None
    per_rank = rows.groupby("rank")[["comm_transfer_us", "norm_us"]].median()
    rank = (per_rank["comm_transfer_us"] + per_rank["norm_us"]).idxmin()
    fused = re.search(r"flashinfer_fused:(\d+)", str(rows["allreduce_impls"].iloc[0]))
    return PassBusy(
        float(per_rank.loc[rank, "comm_transfer_us"]),
        float(per_rank.loc[rank, "norm_us"]),
        int(rows["allreduce_count"].median()),
        int(fused.group(1)) if fused else 0,
        float(rows["bytes_per_allreduce"].iloc[0]),
    )


class LivePair(NamedTuple):
    """A live TP-2 run's baseline and fusion passes."""

    run: str
    baseline: PassBusy
    fusion: PassBusy

    def fused_in_pass_us(self) -> float:
        """One fused kernel inside the fusion pass: its comm time less the calls it left unfused (priced as the
        baseline ran them), per fused call."""
        unfused_left = self.fusion.allreduces - self.fusion.fused
        return (self.fusion.comm_us - unfused_left * self.baseline.call_us) / self.fusion.fused

    def measured_saving_us(self) -> float:
        """What the fusion variant saved per pass: all-reduces and norm kernels, baseline less fusion."""
        return (self.baseline.comm_us + self.baseline.norm_us) - (self.fusion.comm_us + self.fusion.norm_us)


@derived
def live_pairs(runs: MeasuredRuns) -> tuple[LivePair, ...]:
    """Every stored live run with a baseline pass and a fusion pass that ran FlashInfer's fused kernel."""
    pairs = []
    for run_id in runs.runs_with_table("trace_steps"):
        steps = runs.read_table(run_id, "trace_steps")
        base, fusion = pass_busy(steps, "baseline"), pass_busy(steps, "fusion")
        if base is not None and fusion is not None and fusion.fused > 0:
            pairs.append(LivePair(run_id, base, fusion))
    return tuple(pairs)


@dataclass(frozen=True)
class InPassPoint:
    """One measured ratio of the fused kernel inside a pass to its isolated latency at the same message."""

    run: str
    kind: str  # SYNTHETIC or LIVE
    message_bytes: float
    factor: float


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
            return "no trace of a fused pass: isolated latency used"
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
def synthetic_points(runs: MeasuredRuns) -> tuple[InPassPoint, ...]:
    """Per synthetic campaign run and traced size: the fused kernel's comm time per call at all 122 all-reduces
    over the same run's isolated fused curve there."""
    points = []
    for run_id in runs.runs_with_all((*COMM_CAMPAIGN_TABLES, "verify_pass_trace")):
        trace = runs.read_table(run_id, "verify_pass_trace")
        lat = runs.read_table(run_id, "allreduce_latency")
        fused = trace[(trace["variant"] == "fused") & (trace["allreduce_count"] == KIMI_K2_ALLREDUCES_PER_PASS)]
        for (path, tokens), group in fused.groupby(["path", "tokens"]):
            iso = lat[(lat["path"] == path) & (lat["impl"] == "fused") & (lat["tokens"] == tokens)]
            iso = iso[~iso["settings"].astype(str).str.contains("forced", case=False)] if "settings" in iso else iso
            if iso.empty:
                continue
            per_call = float((group["comm_us"] / group["allreduce_count"]).median())
            factor = per_call / float(iso["us"].iloc[0])
            points.append(InPassPoint(run_id, SYNTHETIC, float(iso["bytes"].iloc[0]), factor))
    return tuple(points)


@derived
def live_points(runs: MeasuredRuns) -> tuple[InPassPoint, ...]:
    """Per live TP-2 run: its fused kernel inside the pass over the newest campaign's isolated fused curve at the
    run's message (the live runs timed no isolated kernel of their own)."""
    campaign = runs.newest_with(*COMM_CAMPAIGN_TABLES)
    if campaign is None:
        return ()
    fused = next((c for c in load_curves(campaign, runs) if (c.path, c.impl) == (LIVE_PATH, "fused")), None)
    if fused is None:
        return ()
    return tuple(
        InPassPoint(p.run, LIVE, p.baseline.message_bytes, p.fused_in_pass_us() / fused.at(p.baseline.message_bytes))
        for p in live_pairs(runs)
    )


@derived
def fused_in_pass_fit(runs: MeasuredRuns, leave_out: str | None = None) -> InPassFit:
    """The fit over every stored trace (``leave_out``: without that run's points, to predict it out of sample)."""
    points = [p for p in (*synthetic_points(runs), *live_points(runs)) if p.run != leave_out]
    return fit_in_pass(points)


def in_pass_fit_table(runs: MeasuredRuns) -> pd.DataFrame:
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


def pass_factors(runs: MeasuredRuns, path: str, message_bytes: float) -> dict[str, float]:
    """Each implementation's cost inside a pass on ``path`` over its isolated latency: NCCL's from the synthetic
    traces of that path, the fused kernel's from the fit at ``message_bytes``."""
    factors = {impl: f for (where, impl), f in in_pass_factors(runs).items() if where == path and impl != "fused"}
    fit = fused_in_pass_fit(runs)
    if fit.points:
        factors["fused"] = fit.at(message_bytes)
    return factors
