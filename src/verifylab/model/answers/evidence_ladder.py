"""Answers from the nearest evidence. Per context band, the speculation answer comes from the box's own stored
measurement (a `box --verify` run tagged with the box), else a public per-context matrix on the same GPUs and model
family moved to the band's context, else the model; each answer says which, and its band is that evidence's own
(the measured cells; the transfer's fit and accept range; the model's ends). An answer is a setting where its band
decides (within a factor of 3, on one side of one stream), else the one command that settles it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

import pandas as pd

from verifylab.model.answers.context_answer import anchored_answer, matching_matrix
from verifylab.model.answers.engine_answer import EngineBands
from verifylab.model.fits.context import AttentionFit, stops_for_good
from verifylab.model.inputs.context_matrix import ContextMatrix
from verifylab.model.inputs.model_costs import ModelCosts
from verifylab.model.inputs.stored import stored_inputs
from verifylab.model.pricing.speculation import SpeculationAnswer, crossings
from verifylab.sources import MeasuredRuns, ModelSources
from verifylab.span import Span
from verifylab.vocab import Drafter

BANDS: tuple[tuple[str, int], ...] = (("short", 1024), ("16k", 16384), ("32k", 32768), ("64k+", 65536))
DECIDES = 3.0  # a crossover range decides when its ends are within this factor
SETTLE_MINUTES = 10  # `box --plan --verify`'s default budget: three servers, each swept at three loads


class Setting(Enum):
    """What a band's answer sets: speculation off, on at every load, on up to a stream count, or measure first."""

    OFF = "off"
    ON = "on"
    ON_UP_TO = "on up to"
    ON_BETWEEN = "on between"  # it loses at one stream, pays from a load on (and up to one)
    MEASURE = "measure"


class Rung(Enum):
    """Where an answer comes from, nearest first."""

    BOX = "measured on your box"
    PUBLIC = "public, the same GPUs and model family"
    MODEL = "modelled"


@dataclass(frozen=True)
class BoxSpec:
    """The box an answer is for: its model, GPU key and count, regime (command-line key), chain, accept length (None:
    the evidence's own), and the name its own runs are tagged with."""

    target: ModelCosts
    gpu: str
    tp: int
    regime: str | None
    draft_tokens: int = 4
    accept: float | None = None
    name: str = ""


@dataclass(frozen=True)
class BandAnswer:
    """The speculation answer at one context band: its rung and source, the gain at one stream and where speculation
    stops paying for good (None high: beyond ``last`` streams), over the streams the evidence spans."""

    band: str
    context: int
    rung: Rung
    source: str
    gain_one: Span | None
    stops: tuple[float | None, float | None]
    last: int
    cap: int | None = None  # distinct streams the KV pool holds at this context (None: not capped)
    widened: float = 0.0  # the relative error each end of ``stops`` was widened by (a transfer's out-of-sample miss)
    # where a gain that loses at one stream first pays: (earliest end, latest end); None: that end never pays
    starts: tuple[float | None, float | None] = (None, None)

    @property
    def decisive(self) -> bool:
        low, high = self.stops
        if low is None and high is None:
            return True  # pays at every load the evidence spans, once it pays
        return low is not None and high is not None and low > 0 and high / low <= DECIDES

    @property
    def kind(self) -> Setting:
        """The answer as a value: off, on at every load, on up to a stream count, on between two (it loses at one
        stream, pays from a load on), or measure first."""
        low, high = self.stops
        if self.gain_one is not None and self.gain_one.high < 1.0:
            early, late = self.starts
            if early is None:
                return Setting.OFF  # no end of the gain pays at any load the evidence spans
            if late is not None and late / early <= DECIDES and self.decisive:
                return Setting.ON_BETWEEN
            return Setting.MEASURE
        if low is None and high is None:
            return Setting.ON
        if self.decisive and low is not None and high is not None:
            return Setting.ON_UP_TO
        return Setting.MEASURE

    @property
    def pays(self) -> bool:
        """Whether EAGLE-3 may pay at some load of this band (every answer but off)."""
        return self.kind is not Setting.OFF

    @property
    def setting(self) -> str:
        """``EAGLE-3 on up to 30-40 streams`` / ``off`` / ``on at every load to 128 streams`` / the command."""
        low, high, kind = *self.stops, self.kind
        if kind is Setting.OFF:
            return "EAGLE-3 off (it loses from one stream)"
        if kind is Setting.ON:
            if self.cap is not None and self.last >= self.cap:
                return f"EAGLE-3 on at every load the KV pool holds ({self.cap} distinct streams)"
            return f"EAGLE-3 on at every load to {self.last} streams"
        if kind is Setting.ON_UP_TO and low is not None and high is not None:
            return f"EAGLE-3 on up to {Span(low, high).text(0)} streams, off beyond"
        early, late = self.starts
        if kind is Setting.ON_BETWEEN and early is not None and late is not None:
            beyond = (
                f"up to {Span(low, high).text(0)} streams, off beyond"
                if low is not None and high is not None
                else f"to every load the evidence spans ({self.last} streams)"
            )
            return f"EAGLE-3 off below {Span(early, late).text(0)} streams (it loses at one), on from there {beyond}"
        return settle_command(self.context)


CASE_BOX_OPTIONS = "--config examples/configs/kimi-k2.5-int4 --gpu rtx-pro-6000 --tp 8 --regime healthy-p2p"


def settle_command(context: int, box: str = CASE_BOX_OPTIONS) -> str:
    """The one command that settles an answer on the box (``box``: its options; the case study's by default), with
    its minutes; FILE is the YAML of how SGLang starts there (benchmarks/box/)."""
    return (
        f"measure first: `verifylab box --plan {box} --context {context} --verify FILE` (about {SETTLE_MINUTES} GPU "
        "minutes)"
    )


def _box_runs(runs: MeasuredRuns, spec: BoxSpec) -> list[tuple[int, pd.DataFrame, str]]:
    """The box's own `box --verify` runs (tagged with ``spec.name``): their context and their compared cells."""
    if not spec.name:
        return []
    out = []
    for run_id in runs.runs_with_table("box_verify"):
        params = runs.run(run_id).parameters
        if params.get("box") == spec.name and "context" in params:
            out.append((int(params["context"]), runs.read_table(run_id, "box_verify"), run_id))
    return out


def _measured_band(context: int, table: pd.DataFrame, run_id: str, band: str, band_context: int) -> BandAnswer | None:
    """EAGLE-3 against plain decoding as the box measured them at the same stream counts."""
    plain = table[table["role"] == "plain"].set_index("streams")["measured_tokens_per_s"]
    eagle = table[table["configuration"].str.startswith("EAGLE-3")]
    if plain.empty or eagle.empty:
        return None
    best = eagle.groupby("streams")["measured_tokens_per_s"].max()
    points = [(int(s), float(best[s] / plain[s])) for s in sorted(set(best.index) & set(plain.index))]
    if not points:
        return None
    stops = stops_for_good(points)
    gain_one = Span(points[0][1], points[0][1]) if points[0][0] == 1 else None
    start = _first_pays(points)
    return BandAnswer(
        band,
        band_context,
        Rung.BOX,
        f"run {run_id} (context {context})",
        gain_one,
        (stops, stops),
        points[-1][0],
        starts=(start, start),
    )


def _first_pays(points: Sequence[tuple[float, float]]) -> float | None:
    """Where a gain curve that loses at its first stream count first reaches 1 (None: it never does, or it pays from
    the first)."""
    if not points or sorted(points)[0][1] >= 1.0:
        return None
    return next((at for at, direction in crossings(points) if direction == "pays"), None)


def _nearest_band(context: int) -> str:
    return min(BANDS, key=lambda b: abs(math.log(b[1]) - math.log(max(context, 1))))[0]


def band_answers(
    ev: ModelSources,
    spec: BoxSpec,
    model_answer: Callable[[float], SpeculationAnswer] | None = None,
    engine: EngineBands | None = None,
) -> list[BandAnswer]:
    """The speculation answer per context band (:data:`BANDS`), each from the nearest evidence; ``engine``: a public
    matrix's transfer re-priced for the owner's engine (its verify, the KV pool's cap on distinct streams) and
    widened by the transfer's out-of-sample error."""
    measured = {_nearest_band(c): (c, t, r) for c, t, r in _box_runs(ev.measured, spec)}
    matched = matching_matrix(
        stored_inputs(ev), spec.target, spec.gpu, spec.tp, spec.regime, Drafter.EAGLE3, spec.draft_tokens
    )
    out = []
    for band, context in BANDS:
        if band in measured and (found := _measured_band(*measured[band], band, context)) is not None:
            out.append(found)
            continue
        if matched is not None:
            matrix, fit = matched
            if engine is None:
                answer = anchored_answer(matrix, fit, context, spec.accept, matrix.streams)
                out.append(_from_answer(band, context, Rung.PUBLIC, matrix.source, answer))
                continue
            out.append(transfer_band(context, matrix, fit, spec.accept, engine))
            continue
        if model_answer is not None:
            out.append(_from_answer(band, context, Rung.MODEL, "the speculation model", model_answer(context)))
    return out


def transfer_band(
    context: int, matrix: ContextMatrix, fit: AttentionFit, accept: float | None, engine: EngineBands
) -> BandAnswer:
    """The speculation answer at ``context`` from the public matrix that ran the box, re-priced for the engine (its
    verify, the pool capping distinct streams) over the stream counts the matrix spans, its crossover widened by the
    transfer's out-of-sample error: the one computation the decision page's bands, ``model speculation`` and
    ``box --plan`` give for this question."""
    answer = anchored_answer(matrix, fit, context, accept, matrix.streams, engine.verify, None, engine.pool)
    found = _from_answer(_nearest_band(context), context, Rung.PUBLIC, matrix.source, answer)
    return _widened(found, engine.widen)


def _widened(answer: BandAnswer, widen: float) -> BandAnswer:
    """``answer`` with its crossover band widened by ``widen`` at each end (a band no narrower than the error)."""
    low, high = answer.stops
    stops = (None if low is None else low / (1 + widen), None if high is None else high * (1 + widen))
    early, late = answer.starts
    starts = (None if early is None else early / (1 + widen), None if late is None else late * (1 + widen))
    return replace(answer, stops=stops, widened=widen, starts=starts)


def _from_answer(band: str, context: int, rung: Rung, source: str, answer: SpeculationAnswer) -> BandAnswer:
    rows = answer.rows
    one = next((r.gain for r in rows if r.streams == 1), None)
    last = max(r.streams for r in rows) if rows else 0
    optimistic = _first_pays([(r.streams, r.gain.high) for r in rows])
    pessimistic = _first_pays([(r.streams, r.gain.low) for r in rows])
    starts = (optimistic, pessimistic) if optimistic is not None else (None, None)
    return BandAnswer(band, context, rung, source, one, answer.crossover, last, answer.stream_cap, starts=starts)


def bands_words(answers: Sequence[BandAnswer]) -> str:
    """``short: EAGLE-3 on up to 97-99 streams; 16k: ... (public, the same GPUs and model family)``: each band's
    setting, grouped by the rung that decided it."""
    if not answers:
        return "no evidence and no model answer"
    parts = []
    for rung in Rung:
        mine = [a for a in answers if a.rung is rung]
        if not mine:
            continue
        limited = [a for a in mine if a.kind is Setting.ON_UP_TO]
        if len(limited) == len(mine):  # one verb for the lot: "EAGLE-3 on up to: short 97-100 streams, 16k 30-40"
            spans = [a.setting.removeprefix("EAGLE-3 on up to ").removesuffix(" streams, off beyond") for a in mine]
            listed = ", ".join(f"{a.band} {s}" + (" streams" if i == 0 else "") for i, (a, s) in
                               enumerate(zip(mine, spans, strict=True)))  # fmt: skip
            parts.append(f"EAGLE-3 on up to {listed}, off beyond ({rung.value})")
        else:
            parts.append("; ".join(f"{a.band}: {a.setting}" for a in mine) + f" ({rung.value})")
    return "; ".join(parts)
