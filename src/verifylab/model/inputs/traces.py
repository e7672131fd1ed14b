"""What stored traces measured of the fused all-reduce inside a pass: the live TP-2 passes' busy times (baseline and
fusion) and each trace's ratio of the fused kernel in a pass to its isolated latency."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from verifylab.derived import derived
from verifylab.model.inputs.curves import stored_curves
from verifylab.sources import MeasuredRuns
from verifylab.vocab import COMM_CAMPAIGN_TABLES, KIMI_K2_ALLREDUCES_PER_PASS, KIMI_K2_HIDDEN

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
    curves = stored_curves(runs, campaign, KIMI_K2_HIDDEN)
    fused = next((c for c in curves if (c.path, c.impl) == (LIVE_PATH, "fused")), None)
    if fused is None:
        return ()
    return tuple(
        InPassPoint(p.run, LIVE, p.baseline.message_bytes, p.fused_in_pass_us() / fused.at(p.baseline.message_bytes))
        for p in live_pairs(runs)
    )
