"""Routing overlap as a named input of the case study's speculation answer: how much the tokens of one stream's
verify chain share experts (0: each picks its own, as independent draws; 1: the chain reads one token's experts).
The answer is priced at each overlap of :data:`OVERLAP_POINTS`, beside the one overlap measured here (the H200
spread-forced grid's fit: a random-weight router, not a trained one)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from verifylab.model.case import speculation_case
from verifylab.model.cycle import Span
from verifylab.model.decision import speculation_in_words
from verifylab.model.model_config import Routing
from verifylab.model.regimes import REGIME_TITLE
from verifylab.model.speculation_inputs import fit_grid, grid_routing, grid_runs
from verifylab.sources import MeasuredRuns, ModelSources
from verifylab.vocab import Regime

OVERLAP_POINTS = (0.0, 0.25, 0.5, 0.75, 1.0)
ANSWERED_REGIMES = (Regime.HEALTHY_P2P, Regime.DEGRADED)  # the owner's healthy box and the case study's own


def measured_overlap(runs: MeasuredRuns) -> tuple[float, str] | None:
    """The overlap the newest spread-forced grid's fit chose, with its run (None: no such grid stored)."""
    spread = [r for r in grid_runs(runs) if grid_routing(runs, r) is Routing.UNIFORM]
    if not spread:
        return None
    run_id = spread[-1]
    return fit_grid(runs, run_id).box.chain_overlap.low, run_id


def speculation_by_overlap(ev: ModelSources) -> pd.DataFrame:
    """Per regime and routing overlap: EAGLE-3's gain at one stream and where it stops paying on the case study's
    box (TP 8, NCCL, its reported accept length, over its draft-token range; modelled)."""
    measured = measured_overlap(ev.measured)
    rows = []
    for regime in ANSWERED_REGIMES:
        case = speculation_case(ev)[regime]
        for overlap in OVERLAP_POINTS:
            box = replace(case.box, chain_overlap=Span(overlap, overlap))
            gain, pays = speculation_in_words(case, box, case.accept)
            rows.append(
                {
                    "regime": REGIME_TITLE[regime],
                    "routing_overlap": overlap,
                    "gain_one_stream": gain,
                    "speculation_pays": pays,
                    "overlap_source": _source(overlap, measured),
                    "provenance": "modelled",
                }
            )
    return pd.DataFrame(rows)


def _source(overlap: float, measured: tuple[float, str] | None) -> str:
    """Where an overlap stands: the independent-draws bound, the measured grid's fit, the shared-chain bound."""
    words = []
    if overlap == 0.0:
        words.append("bound: every token picks its own experts (what the book priced before)")
    if overlap == 1.0:
        words.append("bound: the chain reads one token's experts")
    if measured is not None and abs(overlap - measured[0]) < 1e-9:
        words.append(f"fitted on run {measured[1]} (H200, random weights: not a trained router)")
    return "; ".join(words) or "between the bounds"
