"""What the speculation model reads from measured runs, as values: each speculation-grid sweep (plain or a drafter at
its draft tokens and accept length, ms per token at each stream count), the model configs a run served, and a
GPU's measured copy and matrix ceilings. Reads runs through :class:`~verifylab.sources.MeasuredRuns` only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

import numpy as np
import pandas as pd

from verifylab.derived import derived
from verifylab.errors import ModelInputError
from verifylab.model.cycle import Span
from verifylab.model.model_config import ModelCosts, Routing, costs_from_config
from verifylab.model.speculation import (
    Box,
    Ceilings,
    Overheads,
    fit_cycle,
    fit_host,
    gains,
    gpu_named,
    physics_ms,
    scenarios,
)
from verifylab.selection import newest_of_each_experiment
from verifylab.sources import MeasuredRuns
from verifylab.vocab import SPECULATION_POINTS_TABLE, Drafter

POINTS_TABLE = SPECULATION_POINTS_TABLE


@dataclass(frozen=True)
class Sweep:
    """One server of a speculation grid: its decode-phase ms per token (mean over requests) at each stream count."""

    run_id: str
    variant: str
    drafter: Drafter | None
    draft_tokens: int
    accept_target: float
    accept_measured: float | None
    ms_per_token: tuple[tuple[int, float], ...]

    @property
    def key(self) -> tuple[str, int, float]:
        return (self.drafter.value if self.drafter else "none", self.draft_tokens, self.accept_target)


ACCEPT_TOLERANCE = 0.05  # a sweep whose measured accept length misses its target by more is no sweep at it


def grid_runs(runs: MeasuredRuns) -> list[str]:
    """Runs that hold a speculation grid and may be evidence, oldest first: a run marked mechanics only (a test
    double's) is never one, and of a grid measured again with the same parameters the newest run stands for it
    (:mod:`verifylab.selection`)."""
    grids = [runs.run(r) for r in runs.runs_with_table(POINTS_TABLE) if not runs.run(r).mechanics_only]
    return [r.run_id for r in newest_of_each_experiment(grids)]


def grid_requests(runs: MeasuredRuns, run_id: str) -> pd.DataFrame:
    """Every request of a grid run, with its server's drafter, draft tokens and accept length asked for (a copy:
    the caller may change it)."""
    return _grid_requests(runs, run_id).copy()


@derived
def _grid_requests(runs: MeasuredRuns, run_id: str) -> pd.DataFrame:
    run = runs.run(run_id)
    points = runs.read_table(run_id, POINTS_TABLE)
    frames = [runs.read_table(run_id, t) for t in sorted(run.tables) if t.startswith("sweep-")]
    if not frames:
        return pd.DataFrame()
    requests = pd.concat(frames, ignore_index=True)
    requests = requests[requests["ok"].astype(bool) & requests["tpot_s"].notna()]
    keep = ["variant", "drafter", "draft_tokens", "accept_target", "active"]
    return requests.merge(points[keep], on="variant", how="inner").assign(run_id=run_id)


@derived
def sweeps(runs: MeasuredRuns, run_id: str) -> tuple[Sweep, ...]:
    """The run's sweeps of servers that were active and held the accept length asked of them (within
    :data:`ACCEPT_TOLERANCE`: a server that ignored it is no sweep at that length), each with its mean ms per token
    by stream count."""
    requests = _grid_requests(runs, run_id)
    out = []
    keys = ["variant", "drafter", "draft_tokens", "accept_target"]
    for (variant, drafter, k, target), part in requests.groupby(keys):
        if not part["active"].astype(bool).all():
            continue
        by_c = part.groupby("concurrency")["tpot_s"].mean().sort_index()
        accept = token_weighted_accept(part)
        if drafter != "none" and (accept is None or abs(accept / float(target) - 1) > ACCEPT_TOLERANCE):
            continue
        out.append(
            Sweep(
                run_id,
                str(variant),
                None if drafter == "none" else Drafter(drafter),
                int(k),
                float(target),
                accept,
                tuple((int(c), float(v) * 1e3) for c, v in by_c.items()),
            )
        )
    return tuple(out)


def token_weighted_accept(requests: pd.DataFrame) -> float | None:
    """Tokens over verify passes of the requests that report passes; None when none does."""
    counted = requests.dropna(subset=["spec_verify_ct"])
    return float(counted["output_tokens"].sum() / counted["spec_verify_ct"].sum()) if not counted.empty else None


def mean_context(runs: MeasuredRuns, run_id: str) -> float:
    """Tokens of KV a stream attends over on average in a run: its prompt plus half its output."""
    requests = _grid_requests(runs, run_id)
    if requests.empty:
        raise ModelInputError(f"run {run_id}: no successful request to take the context from")
    return float((requests["prompt_tokens"] + requests["output_tokens"] / 2).mean())


def served_costs(runs: MeasuredRuns, run_id: str) -> tuple[ModelCosts, ModelCosts | None]:
    """The target (and draft) the run served, from the configs its manifest records."""
    params = runs.run(run_id).parameters
    if not isinstance(params.get("served_config"), dict):
        raise ModelInputError(f"run {run_id} records no served_config: its model cannot be priced")
    target = costs_from_config(params["served_config"], f"run {run_id} served_config")
    draft = params.get("draft_config")
    return target, costs_from_config(draft, f"run {run_id} draft_config") if isinstance(draft, dict) else None


def _gpu_key(text: str) -> str | None:
    low = text.lower()
    for key in ("h200", "h100"):
        if key in low:
            return key
    return None


def measured_ceilings(runs: MeasuredRuns, gpu: str | None = None) -> Ceilings | None:
    """The newest measured copy and matrix ceilings (of ``gpu`` when given): the copy bandwidth, and the matrix
    rate as the range over the runs of that GPU (a repeated experiment: its newest run)."""
    measured = [r.run_id for r in newest_of_each_experiment(runs.run(r) for r in runs.runs_with_table("ceilings"))]
    for run_id in sorted(measured, reverse=True):
        run = runs.run(run_id)
        key = _gpu_key(run.gpu_name or run.label or run_id) or _gpu_key(run_id)
        if key is None or (gpu is not None and key != gpu):
            continue
        same = [
            runs.read_table(r, "ceilings")
            for r in measured
            if (_gpu_key(runs.run(r).gpu_name or runs.run(r).label or r) or _gpu_key(r)) == key
        ]
        table = pd.concat(same, ignore_index=True)
        copy = float(np.median(table["copy_bandwidth_gbs"]))
        tf = Span(float(table["matmul_tflops"].min()), float(table["matmul_tflops"].max()))
        return Ceilings(key, copy, tf, f"{len(same)} measured run(s), newest {run_id}")
    return None


@dataclass(frozen=True)
class GridFit:
    """A grid run's model: the box it ran on, what was fitted and on which sweeps, and every sweep of the run."""

    run_id: str
    box: Box
    overheads: Overheads
    fitted_on: dict[str, str]  # what -> the sweep (variant) it was fitted on
    below_physics: tuple[int, ...]  # plain stream counts measured faster than the box's physics allows
    sweeps: tuple[Sweep, ...]

    @property
    def routing(self) -> Routing:
        return self.box.routing


FIT_ACCEPT = 2.0  # the accept length each drafter's overhead is fitted on; the others are predicted


OVERLAPS = tuple(i / 10 for i in range(11))  # the routing overlaps a uniform-routing fit tries


@derived
def fit_grid(runs: MeasuredRuns, run_id: str, routing: Routing | None = None) -> GridFit:
    """Fit a grid run: the host overhead on its plain sweep, each drafter's cycle overhead on its sweep at
    :data:`FIT_ACCEPT` (the longest chain); every other sweep is left to predict. ``routing``: the run's own
    (:func:`grid_routing`) unless given; under uniform routing the chain's overlap is fitted too, on the same sweeps
    (the overlap of :data:`OVERLAPS` whose cycle fit misses least)."""
    routing = grid_routing(runs, run_id) if routing is None else routing
    if routing is Routing.COLLAPSED:
        return _fit_grid(runs, run_id, routing, 0.0)
    fits = [_fit_grid(runs, run_id, routing, o) for o in OVERLAPS]
    return min(fits, key=lambda f: max(f.overheads.cycle_miss.values(), default=0.0))


def _fit_grid(runs: MeasuredRuns, run_id: str, routing: Routing, overlap: float) -> GridFit:
    all_sweeps = sweeps(runs, run_id)
    plain = next((s for s in all_sweeps if s.drafter is None), None)
    if plain is None:
        raise ModelInputError(f"run {run_id} has no plain-decoding sweep: nothing to fit the host overhead on")
    target, draft = served_costs(runs, run_id)
    key = _gpu_key(runs.run(run_id).gpu_name or runs.run(run_id).label) or "h200"
    gpu = gpu_named(key, measured_ceilings(runs, key))
    box = Box(
        target,
        gpu,
        tp=1,
        draft=draft,
        context=mean_context(runs, run_id),
        routing=routing,
        chain_overlap=Span(overlap, overlap),
    )
    host = fit_host(box, plain.ms_per_token)
    overheads = Overheads(Span(host.intercept_ms, host.intercept_ms), host.per_stream_ms, {}, f"fitted on run {run_id}")
    fitted_on = {"host": plain.variant}
    misses = {}
    cycle = {}
    for drafter in Drafter:
        candidates = [s for s in all_sweeps if s.drafter is drafter and s.accept_target == FIT_ACCEPT]
        if not candidates:
            continue
        chosen = max(candidates, key=lambda s: s.draft_tokens)
        fit = fit_cycle(box, overheads, drafter, chosen.draft_tokens, chosen.accept_target, chosen.ms_per_token)
        cycle[drafter] = (fit.intercept_ms, fit.per_stream_ms)
        fitted_on[drafter.value] = chosen.variant
        misses[drafter] = fit.relative_miss
    overheads = Overheads(overheads.host0_ms, overheads.host1_ms, cycle, overheads.source, host.relative_miss, misses)
    return GridFit(run_id, box, overheads, fitted_on, host.below_physics, tuple(all_sweeps))


def first_grid_fit(runs: MeasuredRuns, routing: Routing = Routing.COLLAPSED) -> GridFit | None:
    """The fit of the oldest grid run of ``routing`` that holds what a fit needs (plain decoding and a drafter's
    sweep at :data:`FIT_ACCEPT`): the one fit the book and the model's other boxes share; None when no run does."""
    for run_id in grid_runs(runs):
        if grid_routing(runs, run_id) is not routing:
            continue
        fit = fit_grid(runs, run_id, routing)
        if fit.overheads.cycle:
            return fit
    return None


def same_box(runs: MeasuredRuns, a: str, b: str) -> bool:
    """Two grid runs of the same served model on the same GPU whose speculative servers routed alike (one's fit
    prices the other's speculative cycles)."""
    ra, rb = runs.run(a), runs.run(b)
    return (
        ra.parameters.get("served_config") == rb.parameters.get("served_config")
        and ra.gpu_name == rb.gpu_name
        and speculative_routing(runs, a) is speculative_routing(runs, b)
    )


def fit_for(runs: MeasuredRuns, run_id: str) -> GridFit | None:
    """The fit that prices grid run ``run_id``'s speculative servers: the oldest fittable run of its served model,
    GPU and speculative routing (itself, or one before it), fitted with that routing."""
    for candidate in grid_runs(runs):
        if same_box(runs, candidate, run_id):
            fit = fit_grid(runs, candidate, speculative_routing(runs, candidate))
            if fit.overheads.cycle:
                return fit
    return None


def grid_routing(runs: MeasuredRuns, run_id: str) -> Routing:
    """How a grid run's random router routed plain decoding: uniform where its tokens diverged (requests sampled at
    a temperature > 0, speculative servers accepting the draft's own tokens), collapsed otherwise (greedy, one
    repeated token)."""
    spec = runs.run(run_id).parameters.get("speculation")
    if not isinstance(spec, dict):
        return Routing.COLLAPSED
    temperature = spec.get("temperature", 0.0)
    spread = isinstance(temperature, int | float) and temperature > 0 and spec.get("token_mode") == "real-draft-token"
    return Routing.UNIFORM if spread else Routing.COLLAPSED


def speculative_routing(runs: MeasuredRuns, run_id: str) -> Routing:
    """How a grid run's speculative servers routed: collapsed where the draft model loaded random weights (its
    greedy picks repeat one token, and the simulated acceptance keeps them as the stream's tokens, whatever the
    sampling), else as plain decoding did (:func:`grid_routing`)."""
    base = runs.run(run_id).parameters.get("base")
    args = base.get("extra_args", []) if isinstance(base, dict) else []
    random_draft = any(a == "--speculative-draft-load-format" and b == "dummy" for a, b in pairwise(args))
    return Routing.COLLAPSED if random_draft else grid_routing(runs, run_id)


def predict_sweeps(
    fit: GridFit,
    points: Sequence[tuple[Drafter, int, float]],
    streams: Sequence[int],
    routing: Routing,
    overlap: Span = Span(0.0, 0.0),
) -> pd.DataFrame:
    """What ``fit`` predicts for servers it was not fitted on, with the routing they run: per server (drafter, draft
    tokens, accept length) and stream count, plain and speculative tok/s and the gain, each a range; and plain
    decoding's physics floor when every token draws its own experts (``spread_floor_ms``: at 128 streams nearly every
    routed expert, read once at the GPU's copy bandwidth)."""
    box = replace(fit.box, routing=routing, chain_overlap=overlap)
    floor_box = replace(fit.box, routing=Routing.UNIFORM, chain_overlap=Span(0.0, 0.0))
    fastest = max(scenarios(floor_box), key=lambda s: (s.bandwidth_gbs, s.tflops))
    rows = []
    for drafter, k, accept in points:
        for r in gains(box, fit.overheads, drafter, accept, k, streams):
            rows.append(
                {
                    "drafter": drafter.value,
                    "draft_tokens": k,
                    "accept_target": accept,
                    **r.as_row(),
                    "spread_floor_ms": physics_ms(floor_box, floor_box.target, r.streams, r.streams, fastest),
                    "routing": routing.value,
                    "overlap_low": overlap.low,
                    "overlap_high": overlap.high,
                    "fitted_run": fit.run_id,
                }
            )
    return pd.DataFrame(rows)
