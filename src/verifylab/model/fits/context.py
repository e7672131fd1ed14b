"""Context length from a public per-context matrix: what 1,000 tokens of a stream's context add to a plain step and
to a speculative cycle, fitted on the matrix's plain cells and checked on every cell it never saw.

A step of C streams at context L costs the matrix's own step at its shortest context (the anchor row) plus
dL x (a0 + a1 x C), dL the context added in thousands of tokens: a0 per pass, a1 per stream. Both are fitted by least
squares on the plain cells up to 64k whose streams fit both KV pools the page states (named in
:func:`fit_cells`); their band is the fit's leave-one-cell-out spread. A verify reads a stream's context once per
verified token — the engine's mechanism for a multi-token query on the page's attention backend, not a fitted
value — and the draft's passes read its own, so a cycle costs its anchor plus dL x (a0 + reads x a1 x C). Every
speculative cell, the contexts beyond 64k and the other matrices are held out. The accept length is the page's
(derived from its server-reported accept rates) and stated before the fit; its range widens every prediction.

The page's prompts share one prefix (the benchmark reaches 118 running requests of 128k tokens in a pool of 0.34 M):
its KV pool never queues a cell, so no capacity is priced on it; the pools it states are shown beside the fit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise, product

import numpy as np
import pandas as pd

from verifylab.derived import derived
from verifylab.model.inputs.context_matrix import ContextMatrix, context_matrices
from verifylab.model.inputs.gpus import gpu_named
from verifylab.model.inputs.known_models import known_model
from verifylab.model.inputs.stored import StoredInputs
from verifylab.model.pricing.attention import BYTES_ONCE_PER_PASS, AttentionTerms
from verifylab.model.pricing.pass_cost import compare
from verifylab.model.pricing.pricer import price_moved_cycle, price_moved_step, stream_read_ms
from verifylab.model.pricing.speculation import GainRow, crossings
from verifylab.span import Span

FIT_CONTEXT_MAX = 65536  # the contexts answers are given for; longer ones are held out entirely
PER = 1000.0  # contexts in thousands of tokens
PROFILE_POINTS = 41
KV_BYTES = {"fp8": 1.0, "bf16": 2.0, "fp16": 2.0}  # bytes per KV element by the page's kv dtype


@dataclass(frozen=True)
class AttentionFit:
    """The fitted context terms of one matrix (ms per 1,000 tokens of context: ``per_pass`` once per pass,
    ``per_stream`` per stream), their leave-one-cell-out band, the reads of a verify cycle (verified tokens plus the
    draft's passes, in target passes) and the cells fitted on."""

    matrix: str
    per_pass: float
    per_stream: float
    per_pass_band: Span
    per_stream_band: Span
    reads_per_cycle: float
    verify_tokens: int
    draft_reads: float
    fit_cells: tuple[tuple[int, int], ...]
    jackknife: tuple[tuple[float, float], ...]
    fit_rms: float  # the fit's root-mean-square relative miss on the cells it was fitted on

    def ends(self) -> list[tuple[float, float]]:
        """Every (per_pass, per_stream) the predictions are taken over: the fit and each leave-one-out refit."""
        return [(self.per_pass, self.per_stream), *self.jackknife]


def fit_cells(matrix: ContextMatrix) -> list[tuple[int, int]]:
    """The plain cells fitted on: contexts beyond the anchor up to :data:`FIT_CONTEXT_MAX`, streams x context within
    both pools the page states (every stream of the cell held at once by plain decoding and by speculation)."""
    pools = [p for p in (matrix.plain_pool_tokens, matrix.spec_pool_tokens) if p is not None]
    pool = min(pools) if pools else math.inf
    return [
        (context, streams)
        for (context, streams) in sorted(matrix.plain)
        if matrix.anchor < context <= FIT_CONTEXT_MAX and context * streams <= pool
    ]


def _added(matrix: ContextMatrix, context: float) -> float:
    return (context - matrix.anchor) / PER


def _step_ms(rates: dict[tuple[int, int], float], context: int, streams: int) -> float:
    return streams * 1e3 / rates[(context, streams)]


def _least_squares(matrix: ContextMatrix, cells: Sequence[tuple[int, int]]) -> tuple[float, float]:
    rows, ys = [], []
    for context, streams in cells:
        added = _added(matrix, context)
        rows.append([added, added * streams])
        ys.append(_step_ms(matrix.plain, context, streams) - _step_ms(matrix.plain, matrix.anchor, streams))
    (a0, a1), *_ = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)
    return float(a0), float(a1)


def _draft_reads(matrix: ContextMatrix) -> float:
    """A cycle's draft passes (its steps and the extend after the verify: one per verified token), in passes of the
    target's: the page's draft is one layer of the target's own attention (an MLA EAGLE-3 head), so each pass reads
    one layer's share of what a target pass reads."""
    return matrix.verify_tokens / known_model(matrix.config).layers


def fit_attention(matrix: ContextMatrix) -> AttentionFit:
    """The context terms fitted on ``matrix``'s plain cells (:func:`fit_cells`), with their jackknife band."""
    cells = fit_cells(matrix)
    if len(cells) < 3:
        raise ValueError(f"matrix {matrix.name}: {len(cells)} plain cell(s) to fit the context terms on (3 needed)")
    a0, a1 = _least_squares(matrix, cells)
    jack = tuple(_least_squares(matrix, cells[:i] + cells[i + 1 :]) for i in range(len(cells)))
    misses = [
        _plain_rate(matrix, a0, a1, context, streams) / matrix.plain[(context, streams)] - 1
        for context, streams in cells
    ]
    draft = _draft_reads(matrix)
    return AttentionFit(
        matrix.name,
        a0,
        a1,
        Span(min(j[0] for j in (*jack, (a0, a1))), max(j[0] for j in (*jack, (a0, a1)))),
        Span(min(j[1] for j in (*jack, (a0, a1))), max(j[1] for j in (*jack, (a0, a1)))),
        matrix.verify_tokens + draft,
        matrix.verify_tokens,
        draft,
        tuple(cells),
        jack,
        float(np.sqrt(np.mean(np.square(misses)))),
    )


def _row(rates: dict[tuple[int, int], float], context: int) -> list[tuple[int, float]]:
    """Row ``context``'s measured stream counts, each with its step (ms), in order: read once per row, not once per
    stream count asked (a transfer asks every stream count of every row it prices)."""
    return [(s, _step_ms(rates, context, s)) for s in sorted(s for c, s in rates if c == context)]


def _interpolated(row: Sequence[tuple[int, float]], streams: float) -> float | None:
    """The step (ms) at ``streams`` on a row (:func:`_row`): measured, or log-log between the measured stream counts
    around it (None outside them)."""
    for measured, step in row:
        if measured == streams:
            return step
    for (lo, t0), (hi, t1) in pairwise(row):
        if lo < streams < hi:
            f = math.log(streams / lo) / math.log(hi / lo)
            return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))
    return None


def _plain_rate(matrix: ContextMatrix, a0: float, a1: float, context: float, streams: float) -> float:
    step = _interpolated(_row(matrix.plain, matrix.anchor), streams)
    assert step is not None
    return streams * 1e3 / (step + _added(matrix, context) * (a0 + a1 * streams))


VerifyGrowth = Callable[[float, int], Span]  # (context, streams) -> what a verify adds to a cycle from the anchor


def transferred(
    matrix: ContextMatrix,
    fit: AttentionFit,
    context: float,
    streams: Sequence[int],
    accept: float | None = None,
    verify: VerifyGrowth | None = None,
) -> list[GainRow]:
    """Plain and speculative aggregate tok/s and the gain at ``context`` and each stream count the anchor row spans,
    transferred from the matrix's anchor row: each a range over the fit's band and the page's accept range (the
    anchor's cycle time is its speculative rate at that accept length); ``accept``: the owner's (default: the
    page's, each end priced with itself). ``verify``: the verify's growth as another engine's kernel runs it, in
    place of the page's (its verified tokens each reading the context; the draft's reads stay the page's)."""
    rows = []
    added = _added(matrix, context)  # the matrix's, the same at every stream count
    plain_row, spec_row = _row(matrix.plain, matrix.anchor), _row(matrix.spec, matrix.anchor)
    for c in streams:
        step = _interpolated(plain_row, c)
        rate = _interpolated(spec_row, c)
        if step is None or rate is None:
            continue
        plain, spec, gain = [], [], []
        own = verify(context, c) if verify is not None else None
        verify_ends = (None,) if own is None else (own.low, own.high)
        for (a0, a1), page_accept, verify_ms in product(
            fit.ends(), (matrix.accept.low, matrix.accept.high), verify_ends
        ):
            moved_step = price_moved_step(step, added * (a0 + a1 * c), c)
            if verify_ms is None:  # rate: ms per token
                moved_cycle = price_moved_cycle(page_accept * rate, added * (a0 + fit.reads_per_cycle * a1 * c), 0.0, c)
            else:
                moved_cycle = price_moved_cycle(
                    page_accept * rate, added * (a0 + fit.draft_reads * a1 * c), verify_ms, c
                )
            yields = page_accept if accept is None else accept
            plain.append(c * 1e3 / moved_step.total_ms)
            spec.append(c * yields * 1e3 / moved_cycle.total_ms)
            gain.append(compare(moved_step, moved_cycle, yields).speedup)
        rows.append(GainRow(c, Span(min(plain), max(plain)), Span(min(spec), max(spec)), Span(min(gain), max(gain))))
    return rows


def stops_for_good(points: Sequence[tuple[float, float]]) -> float | None:
    """Where a gain curve last falls below 1 and stays below over the streams given (log-interpolated); the first
    stream count when it never reaches 1; None when it ends at 1 or above."""
    found = crossings(points)
    if not found or found[-1][1] != "stops":
        return None
    return found[-1][0]


def crossover_band(
    matrix: ContextMatrix,
    fit: AttentionFit,
    context: float,
    streams: Sequence[int],
    accept: float | None = None,
    verify: VerifyGrowth | None = None,
) -> tuple[float | None, float | None]:
    """Where speculation stops paying for good (:func:`stops_for_good`) at each end the predictions are taken over:
    the earliest and the latest (None: beyond the streams given at that end); ``verify`` as :func:`transferred`."""
    ends = []
    for (a0, a1), page_accept in product(fit.ends(), (matrix.accept.low, matrix.accept.high)):
        one_fit = AttentionFit(**{**fit.__dict__, "per_pass": a0, "per_stream": a1, "jackknife": ()})
        one_matrix = ContextMatrix(**{**matrix.__dict__, "accept": Span(page_accept, page_accept)})
        rows = transferred(one_matrix, one_fit, context, streams, accept, verify)
        ends.append(stops_for_good([(r.streams, r.gain.low) for r in rows]))
        if verify is not None:
            ends.append(stops_for_good([(r.streams, r.gain.high) for r in rows]))
    found = [e for e in ends if e is not None]
    return (min(found) if found else None), (None if None in ends else max(found))


@derived
def context_fits(stored: StoredInputs) -> dict[str, AttentionFit]:
    """Each stored matrix's own fit (a matrix with too few plain cells inside its pools has none)."""
    out = {}
    for matrix in context_matrices(stored.public_context):
        try:
            out[matrix.name] = fit_attention(matrix)
        except ValueError:
            continue
    return out


def fitted_matrix(stored: StoredInputs) -> tuple[ContextMatrix, AttentionFit] | None:
    """The matrix the context terms are fitted on (the first with a fit and both pools stated) and its fit."""
    fits = context_fits(stored)
    for matrix in context_matrices(stored.public_context):
        if matrix.name in fits and matrix.spec_pool_tokens is not None:
            return matrix, fits[matrix.name]
    return None


@derived
def context_check(stored: StoredInputs) -> pd.DataFrame:
    """Every cell of every stored matrix beside its prediction from the fitted matrix's terms, transferred from the
    cell's own matrix's anchor row: role (anchor; plain fitted: its plain rate was fitted on, its speculative one never
    was; held out), reported and predicted plain and speculative tok/s
    and gain (ranges), the middle's relative miss."""
    found = fitted_matrix(stored)
    if found is None:
        return pd.DataFrame()
    fitted, fit = found
    rows = []
    for matrix in context_matrices(stored.public_context):
        fitted_cells = set(fit.fit_cells) if matrix.name == fitted.name else set()
        for context in matrix.contexts:
            predicted = {r.streams: r for r in transferred(matrix, fit, context, matrix.streams)}
            for streams in matrix.streams:
                if streams not in predicted:
                    continue
                p = predicted[streams]
                reported_spec = matrix.spec.get((context, streams))
                role = (
                    "anchor"
                    if context == matrix.anchor
                    else ("plain fitted" if (context, streams) in fitted_cells else "held out")
                )
                plain_mid = (p.plain_tokens_per_s.low + p.plain_tokens_per_s.high) / 2
                spec_mid = (p.spec_tokens_per_s.low + p.spec_tokens_per_s.high) / 2
                rows.append(
                    {
                        "matrix": matrix.name,
                        "context": context,
                        "context_label": matrix.labels[context],
                        "streams": streams,
                        "role": role,
                        "plain_reported": matrix.plain[(context, streams)],
                        "plain_low": p.plain_tokens_per_s.low,
                        "plain_high": p.plain_tokens_per_s.high,
                        "plain_miss": plain_mid / matrix.plain[(context, streams)] - 1,
                        "spec_reported": reported_spec,
                        "spec_low": p.spec_tokens_per_s.low,
                        "spec_high": p.spec_tokens_per_s.high,
                        "spec_miss": None if reported_spec is None else spec_mid / reported_spec - 1,
                        "gain_reported": None
                        if reported_spec is None
                        else reported_spec / matrix.plain[(context, streams)],
                        "gain_low": p.gain.low,
                        "gain_high": p.gain.high,
                    }
                )
    return pd.DataFrame(rows)


@derived
def crossover_check(stored: StoredInputs) -> pd.DataFrame:
    """Per matrix and context: where speculation stops paying for good, as reported (every crossing, and the last)
    and as predicted (a band over the fit's and the accept length's ends), whether the band holds the reported one
    and how wide it is."""
    found = fitted_matrix(stored)
    if found is None:
        return pd.DataFrame()
    fitted, fit = found
    rows = []
    for matrix in context_matrices(stored.public_context):
        for context in matrix.contexts:
            measured = [(s, matrix.spec[(context, s)] / matrix.plain[(context, s)]) for s in matrix.streams
                        if (context, s) in matrix.spec]  # fmt: skip
            reported = stops_for_good(measured)
            low, high = crossover_band(matrix, fit, context, matrix.streams)
            held = context != matrix.anchor
            inside = None
            if held and reported is not None and low is not None and high is not None:
                inside = low <= reported <= high
            rows.append(
                {
                    "matrix": matrix.name,
                    "context": context,
                    "context_label": matrix.labels[context],
                    "role": "held out" if held else "anchor",
                    "reported_crossings": crossings(measured),
                    "reported_stops": reported,
                    "predicted_low": low,
                    "predicted_high": high,
                    "inside": inside,
                    "width": high / low if low is not None and high is not None and low > 0 else None,
                    "fitted_matrix": fitted.name,
                }
            )
    return pd.DataFrame(rows)


@derived
def context_terms(stored: StoredInputs) -> AttentionTerms:
    """The fitted matrix's context terms as the pricer takes them (:class:`AttentionTerms`): its per-pass and
    per-stream growth over the time its box reads one stream's context once (the page's KV bytes at the box's
    bandwidth, the middle of the pricer's range), read once per query token; the bytes once per pass where no matrix
    is stored."""
    found = fitted_matrix(stored)
    if found is None:
        return BYTES_ONCE_PER_PASS
    matrix, fit = found
    model = known_model(matrix.config)
    kv_scale = KV_BYTES.get(matrix.kv_dtype, 2.0) / 2.0  # the model's KV is priced in bf16
    gpu = gpu_named(matrix.gpu, stored.runs.ceilings)
    bandwidth = (gpu.bandwidth_gbs.low + gpu.bandwidth_gbs.high) / 2
    once_ms = stream_read_ms(model, PER, matrix.gpus, bandwidth) * kv_scale
    return AttentionTerms(
        fit.per_pass / once_ms,
        fit.per_stream / once_ms,
        "token",
        f"fitted on {matrix.name}'s plain cells ({matrix.attention}, {matrix.engine.split(',')[0]}; {matrix.source})",
    )
