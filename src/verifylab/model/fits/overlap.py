"""The case study's speculation model on public end-to-end curves (``data/reference/public_speculation.csv``): each
curve's box is priced as the case study's is — plain decoding's host overhead fitted on the curve's own plain sweep,
the drafting overheads measured on the H200 grid, the all-reduce of its interconnect — with the routing overlap of a
verify chain as the one input left free. The overlap is fitted on the curves marked ``fit`` (other models), and the
model then predicts the curves ``held out`` and the case-study family's (``family check``), which never enter a fit.

Each gain is the predicted speculative tok/s over the curve's own reported plain tok/s (as chapter 2 checks its
grids): what is checked is the speculative cycle, not plain decoding."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from verifylab.derived import derived
from verifylab.errors import ModelInputError
from verifylab.model.fits.grid import measured_overheads
from verifylab.model.fits.in_pass import regime_curves
from verifylab.model.fits.overheads import fit_host
from verifylab.model.inputs.gpus import gpu_named
from verifylab.model.inputs.known_models import draft_for, known_model
from verifylab.model.inputs.model_costs import Routing
from verifylab.model.inputs.public_curves import PublicCurve
from verifylab.model.inputs.stored import StoredInputs, StoredRuns
from verifylab.model.pricing.collectives import RegimeCurves
from verifylab.model.pricing.pricer import AllreduceCurve, Box, Overheads
from verifylab.model.pricing.regimes import Collective, Price
from verifylab.model.pricing.speculation import crossings, crossover_streams, gains
from verifylab.span import Span
from verifylab.vocab import Drafter, Regime

OVERLAPS = tuple(round(i / 20, 2) for i in range(21))  # the routing overlaps the fit tries, 0 to 1


FIT_TOLERANCE = 0.02  # overlaps whose median error on the fit curves is within 2 points of the best form the range


def _nvlink_curve(runs: StoredRuns) -> tuple[AllreduceCurve, str]:
    """NVLink's all-reduce from the newest stored run that timed one (2 x H200): from its fused one-shot kernel
    (what SGLang's and vLLM's custom all-reduce resemble) to NCCL."""
    read = runs.nvlink
    if read is None:
        raise ModelInputError("no stored run timed an all-reduce over NVLink: the NVLink curves cannot be priced")
    nccl = read.nccl
    low = read.fused if read.fused is not None else nccl

    def at(message: float) -> Span:
        a, b = low.at(message), nccl.at(message)
        return Span(min(a, b), max(a, b))

    return at, f"NVLink all-reduce of run {read.run_id} (2 x H200), from its fused one-shot kernel to NCCL"


@derived
def _regime_curves(stored: StoredInputs) -> RegimeCurves:
    """Chapter 4's regime curves, built once per evidence for every PCIe curve's box (their prices memoized)."""
    return regime_curves(stored)


@dataclass(frozen=True)
class PcieAllreduce:
    """A healthy PCIe box's all-reduce at ``world`` ranks by message: the fused push curves to NCCL (a value: it
    pickles, as the interactive commands keep derived values on disk)."""

    curves: RegimeCurves
    world: int

    def __call__(self, message: float) -> Span:
        prices = (
            self.curves.price(Regime.HEALTHY_P2P, c, self.world, message) for c in (Collective.FUSED, Collective.NCCL)
        )
        ends = [p for p in prices if isinstance(p, Price)]
        if not ends:
            raise ModelInputError(f"healthy P2P at {self.world} ranks: no public all-reduce curve")
        return Span(min(p.low_us for p in ends), max(p.high_us for p in ends))


def _pcie_curve(stored: StoredInputs, world: int) -> tuple[AllreduceCurve, str]:
    """A healthy PCIe box's custom all-reduce at ``world`` ranks: from the public one-shot push curves (what vLLM's
    and SGLang's PCIe all-reduce are) to NCCL, as chapter 4 prices healthy P2P."""
    at = PcieAllreduce(_regime_curves(stored), world)
    at(world * 2.0**14)
    return at, f"healthy P2P at {world} ranks: the public one-shot push curves to NCCL (chapter 4's curves)"


def curve_box(stored: StoredInputs, curve: PublicCurve, overlap: Span) -> Box:
    """The box a curve ran on, as the pricer sees it: a trained router (uniform routing) with ``overlap``."""
    target = known_model(curve.field("config"))
    gpus = int(curve.rows["gpus"].iloc[0])
    if curve.field("interconnect") == "nvlink":
        allreduce, source = _nvlink_curve(stored.runs)
    else:
        allreduce, source = _pcie_curve(stored, gpus)
    return Box(
        target,
        gpu_named(curve.field("gpu"), stored.runs.ceilings),
        tp=gpus,
        draft=draft_for(curve.field("config"), curve.field("drafter")),
        context=float(curve.rows["context"].iloc[0]),
        routing=Routing.UNIFORM,
        allreduce_us=allreduce,
        comm_source=source,
        chain_overlap=overlap,
    )


def curve_overheads(stored: StoredInputs, curve: PublicCurve, box: Box) -> Overheads:
    """The case study's overheads on a curve's box: host fitted on its reported plain sweep, each cycle's drafting
    overhead as the H200 grid measured it."""
    measured = measured_overheads(stored.runs)
    host = fit_host(box, [(c, c * 1e3 / tps) for c, tps in sorted(curve.plain.items())])
    return Overheads(
        Span(host.intercept_ms, host.intercept_ms),
        host.per_stream_ms,
        measured.cycle,
        f"host fitted on {curve.name}'s plain sweep; drafting {measured.source}",
        host.relative_miss,
        measured.cycle_miss,
    )


@derived
def _priced_box(stored: StoredInputs, name: str) -> tuple[PublicCurve, Box, Overheads]:
    """A curve, its box (no overlap yet) and its overheads, built once per evidence (plain decoding's one token per
    stream makes the host fit the same at every overlap)."""
    curve = next(c for c in stored.public_curves if c.name == name)
    box = curve_box(stored, curve, Span(0.0, 0.0))
    return curve, box, curve_overheads(stored, curve, box)


@derived
def priced_curve(stored: StoredInputs, name: str, overlap: Span) -> pd.DataFrame:
    """One curve's reported gain beside the model's at ``overlap``, per stream count with a speculative rate."""
    curve, box, ov = _priced_box(stored, name)
    box = replace(box, chain_overlap=overlap)
    k = int(curve.rows["verify_tokens"].iloc[0])
    streams = sorted(curve.spec)
    rows_by_accept = [
        gains(box, ov, Drafter.EAGLE3, a, k, streams) for a in sorted({curve.accept.low, curve.accept.high})
    ]
    quotes = {int(r.streams): (str(r.quote_plain), str(r.quote_spec)) for r in curve.rows.itertuples()}
    out = []
    for i, c in enumerate(streams):
        spec = [rows[i].spec_tokens_per_s for rows in rows_by_accept]
        low, high = min(s.low for s in spec) / curve.plain[c], max(s.high for s in spec) / curve.plain[c]
        gain = curve.spec[c] / curve.plain[c]
        out.append(
            {
                "curve": curve.name,
                "role": curve.role,
                "streams": c,
                "quote_plain": quotes[c][0],
                "quote_spec": quotes[c][1],
                "plain_tok_s": curve.plain[c],
                "spec_tok_s": curve.spec[c],
                "gain": gain,
                "predicted_low": low,
                "predicted_high": high,
                "error": (low + high) / 2 / gain - 1,
            }
        )
    return pd.DataFrame(out)


@dataclass(frozen=True)
class OverlapFit:
    """The routing overlap fitted on the fit curves: the best, the range within :data:`FIT_TOLERANCE` of its error,
    each overlap's median error, and the curves it was fitted on."""

    best: float
    span: Span
    median_error: dict[float, float]
    curves: tuple[str, ...]

    def source(self) -> str:
        fitted = ", ".join(self.curves)
        return (
            f"fitted on the public curves of other models ({fitted}): median gain error "
            f"{self.median_error[self.best]:.0%} at {self.best:g}, the range {self.span.text(2)} within "
            f"{FIT_TOLERANCE * 100:.0f} points of it"
        )


@derived
def fitted_overlap(stored: StoredInputs) -> OverlapFit | None:
    """The overlap whose median |error| over every cell of the fit curves is least (None: no fit curve stored)."""
    fit = [c for c in stored.public_curves if c.role == "fit"]
    if not fit:
        return None
    errors = {}
    for o in OVERLAPS:
        cells = pd.concat([priced_curve(stored, c.name, Span(o, o)) for c in fit])
        errors[o] = float(cells["error"].abs().median())
    best = min(errors, key=lambda o: (errors[o], o))
    within = [o for o in OVERLAPS if errors[o] <= errors[best] + FIT_TOLERANCE]
    return OverlapFit(best, Span(min(within), max(within)), errors, tuple(c.name for c in fit))


@derived
def public_check(stored: StoredInputs) -> pd.DataFrame:
    """Every public curve at the fitted overlap range: reported gain beside predicted, per stream count, with the
    curve's role, model, box, engine and source (empty: no curve or no fit curve stored)."""
    fit = fitted_overlap(stored)
    if fit is None:
        return pd.DataFrame()
    frames = []
    for curve in stored.public_curves:
        priced = priced_curve(stored, curve.name, fit.span)
        frames.append(
            priced.assign(
                model=curve.field("model"),
                hardware=curve.hardware,
                engine=curve.field("engine"),
                drafter=curve.field("drafter"),
                verify_tokens=int(curve.rows["verify_tokens"].iloc[0]),
                accept=curve.accept.text(2),
                accept_source=f"{curve.field('accept_note')}: “{curve.field('quote_accept')}”",
                url=curve.field("url"),
                published=curve.field("published"),
            )
        )
    return pd.concat(frames, ignore_index=True)


def check_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per curve of :func:`public_check`: its median error, and where its gain crosses 1 as reported beside where the
    middle of the predicted range does (every crossing, a gain that comes back included) and the first stream count
    each end of the range stops paying at."""
    rows = []
    table = table.assign(predicted_mid=(table["predicted_low"] + table["predicted_high"]) / 2)
    for name, part in table.groupby("curve", sort=False):
        pts = list(part["streams"])

        def points(column: str, part: pd.DataFrame = part, pts: list[int] = pts) -> list[tuple[float, float]]:
            return list(zip(pts, part[column], strict=True))

        low, high = crossover_streams(points("predicted_low")), crossover_streams(points("predicted_high"))
        rows.append(
            {
                "curve": name,
                "role": part["role"].iloc[0],
                "model": part["model"].iloc[0],
                "hardware": part["hardware"].iloc[0],
                "cells": len(part),
                "median_error": float(part["error"].abs().median()),
                "reported": crossings_text(points("gain"), max(pts)),
                "predicted_middle": crossings_text(points("predicted_mid"), max(pts)),
                "predicted_range_stops": f"{_at(low, max(pts))} to {_at(high, max(pts))}",
                "reported_stops": crossover_streams(points("gain")),
                "predicted_low_stops": low,
                "predicted_high_stops": high,
            }
        )
    return pd.DataFrame(rows)


def crossings_text(points: list[tuple[float, float]], last: int) -> str:
    """Every crossing of 1 of a gain curve in words: ``stops at 26, pays again at 50, stops at 100``; ``pays to 32``
    when it never falls below 1 within the streams given; ``never pays`` when it starts below."""
    found = crossings(points)
    if not found:
        return f"pays to {last}"
    words = []
    for at, how in found:
        if how == "stops" and at <= points[0][0]:
            words.append("never pays")
        else:
            words.append(f"{'stops at' if how == 'stops' else 'pays again at'} {at:.0f}")
    return ", ".join(words)


def _at(value: float | None, last: int) -> str:
    return f"beyond {last}" if value is None else f"{value:.0f}"
