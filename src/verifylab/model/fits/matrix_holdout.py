"""Leave one matrix out: the context terms fitted on one stored public matrix predict where speculation stops paying
for good in every other matrix of the same box, each crossover beside the one reported. A crossover whose streams x
context exceed the pool the page states ran only because the page's prompts share one prefix (flagged). The worst
miss of a predicted band's middle up to :data:`HOLDOUT_CONTEXT_MAX` is the transfer's own out-of-sample error, by
which every band the book answers with is widened."""

from __future__ import annotations

import pandas as pd

from verifylab.derived import derived
from verifylab.model.fits.context import context_fits, crossover_band, stops_for_good
from verifylab.model.inputs.context_matrix import context_matrices
from verifylab.model.inputs.stored import StoredInputs

HOLDOUT_CONTEXT_MAX = 65536  # the contexts the book answers for


@derived
def leave_one_matrix_out(stored: StoredInputs) -> pd.DataFrame:
    """Per (matrix fitted on, matrix predicted, context): the reported crossover, the predicted band, whether the band
    holds it, the miss outside the band (0 inside: reported over the high end, or the low end over reported, less
    one) and whether the reported crossover needed the page's shared prefix."""
    fits = context_fits(stored)
    matrices = context_matrices(stored.public_context)
    rows = []
    for fitted in matrices:
        if fitted.name not in fits:
            continue
        for matrix in matrices:
            if matrix.name == fitted.name:
                continue
            pools = [p for p in (matrix.plain_pool_tokens, matrix.spec_pool_tokens) if p] or [
                p for m in matrices for p in (m.plain_pool_tokens, m.spec_pool_tokens) if p
            ]
            pool = min(pools) if pools else None
            for context in matrix.contexts:
                points = [
                    (s, matrix.spec[(context, s)] / matrix.plain[(context, s)])
                    for s in matrix.streams
                    if (context, s) in matrix.spec
                ]
                reported = stops_for_good(points)
                low, high = crossover_band(matrix, fits[fitted.name], context, matrix.streams)
                miss = mid_miss = None
                if reported is not None and low is not None and high is not None:
                    miss = max(reported / high - 1, low / reported - 1, 0.0)
                    mid_miss = (low * high) ** 0.5 / reported - 1
                rows.append(
                    {
                        "fitted_on": fitted.name,
                        "predicted": matrix.name,
                        "context": context,
                        "context_label": matrix.labels[context],
                        "reported_stops": reported,
                        "predicted_low": low,
                        "predicted_high": high,
                        "inside": None if miss is None else miss == 0.0,
                        "miss": miss,
                        "mid_miss": mid_miss,
                        "shared_prefix_only": bool(
                            reported is not None and pool is not None and reported * context > pool
                        ),
                    }
                )
    return pd.DataFrame(rows)


def holdout_miss(stored: StoredInputs) -> float:
    """The transfer's out-of-sample error: the worst relative miss of a predicted band's middle (geometric) against
    the reported crossover, over every held-out matrix's contexts up to :data:`HOLDOUT_CONTEXT_MAX` (0 with fewer
    than two matrices)."""
    check = leave_one_matrix_out(stored)
    if check.empty:
        return 0.0
    answered = check[(check["context"] <= HOLDOUT_CONTEXT_MAX) & check["mid_miss"].notna()]
    return float(answered["mid_miss"].abs().max()) if not answered.empty else 0.0
