"""#80: leave one public matrix out (fit on one stored Kimi matrix, predict the other's crossovers), the crossovers
that ran only on the page's shared prefix flagged, and every band the decision page gives at least as wide as the
transfer's out-of-sample miss."""

from __future__ import annotations

from pathlib import Path

from verifylab.model.answers.case_answers import CASE_ENGINES, case_bands
from verifylab.model.fits.matrix_holdout import HOLDOUT_CONTEXT_MAX, holdout_miss, leave_one_matrix_out
from verifylab.model.inputs.context_matrix import context_matrices
from verifylab.model.inputs.stored import stored_inputs
from verifylab.store.evidence import Evidence

ROOT = Path(__file__).resolve().parents[1]


def test_each_matrix_predicts_the_others_crossovers_and_the_shared_prefix_cells_are_flagged():
    stored = stored_inputs(Evidence(ROOT / "data"))
    check = leave_one_matrix_out(stored)
    assert set(check["fitted_on"]) == set(check["predicted"]) and len(set(check["fitted_on"])) >= 2
    answered = check[(check["context"] <= HOLDOUT_CONTEXT_MAX) & check["reported_stops"].notna()]
    assert answered["mid_miss"].abs().max() == holdout_miss(stored) > 0
    matrices = context_matrices(Evidence(ROOT / "data").public_context)
    pool = min(p for m in matrices for p in (m.plain_pool_tokens, m.spec_pool_tokens) if p)  # both pages' boxes
    assert check["shared_prefix_only"].any()
    for row in answered.itertuples():  # flagged where more streams of that context ran than the pool holds
        assert row.shared_prefix_only == (row.reported_stops * row.context > pool)


def test_every_band_on_the_decision_page_is_at_least_as_wide_as_the_holdout_miss():
    ev = Evidence(ROOT / "data")
    miss = holdout_miss(stored_inputs(ev))
    widths = []
    for engine, backend in CASE_ENGINES:
        for band in case_bands(ev, engine, backend):
            low, high = band.stops
            if low is not None and high is not None and low > 0:
                widths.append(high / low - 1)
    assert widths and min(widths) >= miss
