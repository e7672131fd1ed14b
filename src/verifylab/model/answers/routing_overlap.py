"""Routing overlap as a named input of the case study's speculation answer: how much the tokens of one stream's
verify chain share experts (0: each picks its own, as independent draws; 1: the chain reads one token's experts).
The answer is priced at each overlap of :data:`OVERLAP_POINTS`, beside the range fitted on the public curves of other
models (:mod:`verifylab.model.public_speculation`); the H200 grids cannot measure it (random weights: their
speculative servers' tokens are the random draft's, collapsed whatever the sampling)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from verifylab.model.answers.words import speculation_in_words
from verifylab.model.case.speculation import speculation_case
from verifylab.model.fits.overlap import OverlapFit, fitted_overlap
from verifylab.model.inputs.stored import stored_inputs
from verifylab.model.pricing.regimes import REGIME_TITLE
from verifylab.sources import ModelSources
from verifylab.span import Span
from verifylab.vocab import Regime

OVERLAP_POINTS = (0.0, 0.25, 0.5, 0.75, 1.0)


ANSWERED_REGIMES = (Regime.HEALTHY_P2P, Regime.DEGRADED)  # the owner's healthy box and the case study's own


def speculation_by_overlap(ev: ModelSources) -> pd.DataFrame:
    """Per regime and routing overlap (the points, and the fitted range as one row): EAGLE-3's gain at one stream and
    where it stops paying on the case study's box (TP 8, NCCL, its reported accept length, over its draft-token
    range; modelled)."""
    fit = fitted_overlap(stored_inputs(ev))
    points = [Span(o, o) for o in OVERLAP_POINTS]
    if fit is not None:
        points = sorted({*points, fit.span}, key=lambda s: (s.low, s.high))
    rows = []
    for regime in ANSWERED_REGIMES:
        case = speculation_case(stored_inputs(ev))[regime]
        for overlap in points:
            box = replace(case.box, chain_overlap=overlap)
            gain, pays = speculation_in_words(case, box, case.accept)
            rows.append(
                {
                    "regime": REGIME_TITLE[regime],
                    "routing_overlap": overlap.text(2),
                    "gain_one_stream": gain,
                    "speculation_pays": pays,
                    "overlap_source": _source(overlap, fit),
                    "provenance": "modelled",
                }
            )
    return pd.DataFrame(rows)


def _source(overlap: Span, fit: OverlapFit | None) -> str:
    """Where an overlap stands: the independent-draws bound, the fitted range, the shared-chain bound."""
    words = []
    if fit is not None and overlap == fit.span:
        words.append(f"the case study's input: {fit.source()}")
    if overlap == Span(0.0, 0.0):
        words.append("bound: every token picks its own experts")
    if overlap == Span(1.0, 1.0):
        words.append("bound: the chain reads one token's experts")
    return "; ".join(words) or "between the bounds"
