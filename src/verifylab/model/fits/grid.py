"""A speculation grid's fit: the box it ran on, the overheads fitted on its plain sweep and one accept length, the
routes it took; the one fit the book and every box without a grid of its own share (a box with one is priced on its
own, :func:`box_overheads`), and what it predicts for the sweeps it did not fit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import pandas as pd

from verifylab.derived import derived
from verifylab.errors import ModelInputError
from verifylab.model.fits.overheads import fit_cycle, fit_host
from verifylab.model.inputs.configs import costs_from_config
from verifylab.model.inputs.gpus import Gpu, gpu_named
from verifylab.model.inputs.grids import GridRead, Sweep
from verifylab.model.inputs.model_costs import ModelCosts, Routing
from verifylab.model.inputs.stored import StoredRuns
from verifylab.model.pricing.pricer import Box, Overheads, price_pass, scenarios
from verifylab.model.pricing.speculation import gains
from verifylab.span import Span
from verifylab.vocab import Drafter


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
def fit_grid(runs: StoredRuns, run_id: str, routing: Routing | None = None) -> GridFit:
    """Fit a grid run: the host overhead on its plain sweep, each drafter's cycle overhead on its sweep at
    :data:`FIT_ACCEPT` (the longest chain); every other sweep is left to predict. ``routing``: the run's own
    (:func:`verifylab.model.inputs.grids.grid_routing`) unless given; under uniform routing the chain's overlap is
    fitted too, on the same sweeps (the overlap of :data:`OVERLAPS` whose cycle fit misses least)."""
    grid = runs.grid(run_id)
    routing = grid.routing if routing is None else routing
    gpu = gpu_named(grid.gpu_key, runs.ceilings_of(grid.gpu_key))
    if routing is Routing.COLLAPSED:
        return _fit_grid(grid, gpu, routing, 0.0)
    fits = [_fit_grid(grid, gpu, routing, o) for o in OVERLAPS]
    return min(fits, key=lambda f: max(f.overheads.cycle_miss.values(), default=0.0))


def _fit_grid(grid: GridRead, gpu: Gpu, routing: Routing, overlap: float) -> GridFit:
    run_id, all_sweeps = grid.run_id, grid.sweeps
    plain = next((s for s in all_sweeps if s.drafter is None), None)
    if plain is None:
        raise ModelInputError(f"run {run_id} has no plain-decoding sweep: nothing to fit the host overhead on")
    target, draft = grid.served_costs()
    box = Box(
        target,
        gpu,
        tp=1,
        draft=draft,
        context=grid.mean_context(),
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


def first_grid_fit(runs: StoredRuns, routing: Routing = Routing.COLLAPSED) -> GridFit | None:
    """The fit of the oldest grid run of ``routing`` that holds what a fit needs (plain decoding and a drafter's
    sweep at :data:`FIT_ACCEPT`): the one fit the book and the model's other boxes share; None when no run does."""
    for grid in runs.grids():  # each read when its turn comes: the first that fits is the one
        if grid.routing is not routing:
            continue
        fit = fit_grid(runs, grid.run_id, routing)
        if fit.overheads.cycle:
            return fit
    return None


def fit_for(runs: StoredRuns, run_id: str) -> GridFit | None:
    """The fit that prices grid run ``run_id``'s speculative servers: the oldest fittable run of its served model,
    GPU and speculative routing (itself, or one before it), fitted with that routing."""
    grid = runs.grid(run_id)
    for candidate in runs.grids():
        if candidate.same_box(grid):
            fit = fit_grid(runs, candidate.run_id, candidate.speculative_routing)
            if fit.overheads.cycle:
                return fit
    return None


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
                    "spread_floor_ms": price_pass(
                        floor_box, floor_box.target, r.streams, r.streams, fastest
                    ).physics_ms,
                    "routing": routing.value,
                    "overlap_low": overlap.low,
                    "overlap_high": overlap.high,
                    "fitted_run": fit.run_id,
                }
            )
    return pd.DataFrame(rows)


def measured_overheads(runs: StoredRuns) -> Overheads:
    """The overheads fitted on the first stored speculation grid (host per stream, each drafter's per cycle)."""
    fit = first_grid_fit(runs)
    if fit is not None:
        return fit.overheads
    raise ModelInputError(
        f"no speculation grid under {runs.where} holds plain decoding and a sweep at accept length {FIT_ACCEPT:g}: "
        "run chapter 02 live with its speculation grid first"
    )


def own_grid_fit(runs: StoredRuns, box: Box) -> GridFit | None:
    """The fit of a stored grid of ``box`` itself: its served model and draft on its GPU at TP 1, its routers routed
    as ``box``'s; None where none is stored."""
    if box.tp != 1 or box.draft is None:
        return None
    return _newest_grid_fit(runs, box.target, box.draft, box.gpu.name, box.routing)


def check_grid_fit(runs: StoredRuns, run_id: str) -> GridFit | None:
    """The fit of a stored grid of the box the check ``run_id`` ran on (the served model and draft its manifest
    records, on its GPU, experts spread as a trained router's): what the loop's refit prices the check with, by the
    rule that prices the box's plans (:func:`own_grid_fit`)."""
    parameters = runs.parameters(run_id)
    served, draft = parameters.get("served_config"), parameters.get("draft_config")
    if not isinstance(served, dict) or not isinstance(draft, dict):
        return None
    try:
        target, drafted = costs_from_config(served), costs_from_config(draft)
    except ModelInputError:
        return None
    return _newest_grid_fit(runs, target, drafted, runs.gpu_key_of(run_id), Routing.UNIFORM)


def _newest_grid_fit(
    runs: StoredRuns, target: ModelCosts, draft: ModelCosts, gpu_key: str, routing: Routing
) -> GridFit | None:
    """The fit of the newest stored grid that served ``target`` with ``draft`` on GPU ``gpu_key``, its routers routed
    as ``routing`` (the box as last measured; a grid of another model is not read), or None."""
    for run_id in reversed(runs.grid_ids):
        served, drafted = (runs.parameters(run_id).get(k) for k in ("served_config", "draft_config"))
        if not isinstance(served, dict) or not isinstance(drafted, dict):
            continue
        try:
            same = costs_from_config(served) == target and costs_from_config(drafted) == draft
        except ModelInputError:
            continue
        grid = runs.grid(run_id) if same else None
        if grid is not None and grid.gpu_key == gpu_key and grid.routing is routing:
            fit = fit_grid(runs, run_id, routing)
            if fit.overheads.cycle:
                return fit
    return None


class BoxOverheads(NamedTuple):
    """A box as the nearest grid prices it: the box (its routing overlap the grid's where none was stated) and the
    overheads (their source says which grid)."""

    box: Box
    overheads: Overheads


def box_overheads(runs: StoredRuns, box: Box, overlap_stated: bool = False) -> BoxOverheads:
    """``box`` and the overheads that price it, from the nearest grid: one of the box itself where it is stored (its
    fitted routing overlap too, unless one is ``overlap_stated``), else the first grid's, which every box shares."""
    own = own_grid_fit(runs, box)
    if own is None:
        return BoxOverheads(box, measured_overheads(runs))
    overheads = replace(own.overheads, source=f"fitted on this box's own grid, run {own.run_id}")
    return BoxOverheads(box if overlap_stated else replace(box, chain_overlap=own.box.chain_overlap), overheads)
