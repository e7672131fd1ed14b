"""What ``verifylab model whatif``, ``model pass`` and ``model reconcile`` answer, as values the command only words:
every option per regime at a load (with EAGLE-3's gain and crossover beside the NCCL rows), one pass priced from a
measured compute, and the reported figures reconciled step by step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from verifylab.errors import ModelInputError
from verifylab.model.answers.words import case_off_words
from verifylab.model.case.box import CASE_CONTEXT
from verifylab.model.case.option_prices import option_boxes
from verifylab.model.case.option_tables import options_table
from verifylab.model.case.speculation import SpeculationCase, decode_rate, inputs, speculation_case, speculation_cases
from verifylab.model.case.whatif import inputs_for_box, reconcile_table, whatif_table
from verifylab.model.fits.in_pass import pass_factors
from verifylab.model.inputs.curves import load_curves, norm_us_measured
from verifylab.model.inputs.probes import reader_box
from verifylab.model.inputs.stored import stored_inputs, stored_runs
from verifylab.model.pricing.measured_pass import predict_pass
from verifylab.sources import MeasuredRuns, ModelSources
from verifylab.span import Span
from verifylab.vocab import Regime, allreduce_message_bytes


@dataclass(frozen=True)
class WhatifAnswer:
    """Every option per regime at ``batch`` streams (one row each, the NCCL rows with EAGLE-3's gain, where it stops
    paying and what plain decoding was calibrated to), the curve that priced 'this box', the speculation per regime."""

    batch: int
    table: pd.DataFrame
    box_words: str
    decode_source: str
    cases: dict[Regime, SpeculationCase]
    gains: dict[str, Span]
    off_words: dict[Regime, str]  # where speculation stops paying per regime (and pays again), as Table 4.1 words it


def whatif_answer(
    ev: ModelSources,
    batch: int,
    latency: str | None = None,
    path: str | None = None,
    decode_tok_s: float | None = None,
    context: int | None = None,
) -> WhatifAnswer:
    """The options at ``batch`` streams: the book's own numbers where nothing is given, else priced on the box the
    arguments name (a stored probe or a curve file, a decode rate, a context)."""
    stored = stored_inputs(ev)
    decode, decode_source = decode_rate(stored, decode_tok_s)
    model = inputs(stored) if latency is None else inputs_for_box(stored, reader_box(ev.measured, latency, path))
    own = decode_tok_s is None and latency is None and context is None  # the book's own numbers: kept
    at = float(context) if context is not None else CASE_CONTEXT
    boxes = None if own else option_boxes(stored, model, decode, decode_source, at)
    frame = (whatif_table(stored, batch) if boxes is None else options_table(boxes, batch)).copy()
    cases = speculation_case(stored) if own else speculation_cases(stored, model, decode, decode_source, at)
    gains = {regime.value: case.gain_at(batch) for regime, case in cases.items()}
    box = model.curves.box
    box_words = (
        f"{box.source} ({box.label}), regime {box.regime.value}"
        if box is not None
        else f"none: no 8-GPU probe in {ev.measured.where} and no --latency"
    )
    nccl = frame["key"] == "tp8_nccl"  # the speculation model prices EAGLE-3 against plain decoding on TP 8, NCCL
    frame["eagle3_gain_low"] = [gains[r].low if n else None for r, n in zip(frame["regime_key"], nccl, strict=True)]
    frame["eagle3_gain_high"] = [gains[r].high if n else None for r, n in zip(frame["regime_key"], nccl, strict=True)]
    off_words = {regime: case_off_words(case) for regime, case in cases.items()}
    frame["speculation_off_from"] = [
        off_words[Regime(r)] if n else None for r, n in zip(frame["regime_key"], nccl, strict=True)
    ]
    frame["decode_calibrated_to"] = [decode_source if n else None for n in nccl]
    frame["box_curve"] = [box_words if r == Regime.MEASURED.value else None for r in frame["regime_key"]]
    return WhatifAnswer(batch, frame, box_words, decode_source, cases, gains, off_words)


@dataclass(frozen=True)
class PassAnswer:
    """One pass priced per communication variant, with the norm kernel's time and the in-pass factors it used."""

    variants: list[dict[str, Any]]
    norm_us: float
    norm_source: str
    factors: dict[str, float]


def pass_answer(
    store: MeasuredRuns | None,
    compute_ms: float,
    tokens: float,
    latency: str,
    path: str,
    hidden: int,
    allreduces: int,
    norm_us: float | None = None,
    isolated: bool = False,
    unfused_us: float | None = None,
) -> PassAnswer:
    """A pass of ``compute_ms`` measured compute at ``tokens`` tokens, its all-reduces priced from ``latency`` on
    ``path`` (the stored runs, where there are any, lend the norm kernel and the in-pass factors, unless given)."""
    curves = load_curves(latency, store, path, hidden)
    if norm_us is None:
        found = norm_us_measured(store, tokens) if store else None
        if found is None:
            where = store.where if store is not None else "the data folder (it has no runs)"
            raise ModelInputError(f"no measured norm kernel under {where}: give --norm-us (µs of one add+RMSNorm)")
        norm_us, norm_source = found
    else:
        norm_source = "given (--norm-us)"
    factors: dict[str, float] = {}
    if not isolated and store is not None:
        factors = pass_factors(stored_runs(store), path, allreduce_message_bytes(tokens, hidden))
    variants = predict_pass(compute_ms, tokens, curves, path, norm_us, allreduces, hidden, factors, unfused_us)
    return PassAnswer(variants, norm_us, norm_source, factors)


def reconcile_answer(ev: ModelSources) -> pd.DataFrame:
    """The reported figures reconciled step by step: the step, the figures, the arithmetic and the verdict."""
    return reconcile_table(stored_inputs(ev))
