"""The context terms' error profiles: each fitted parameter of the fitted matrix across its range (the other refitted
at each value) with the fit's root-mean-square miss on its cells, and the verify reads across theirs with the held-out
speculative cells' median miss (:mod:`verifylab.model.fits.context`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from verifylab.model.fits.context import (
    PROFILE_POINTS,
    AttentionFit,
    _added,
    _plain_rate,
    _step_ms,
    fitted_matrix,
    transferred,
)
from verifylab.model.inputs.context_matrix import ContextMatrix
from verifylab.model.inputs.stored import StoredInputs


def error_profiles(stored: StoredInputs) -> pd.DataFrame:
    """Each fitted parameter across its range (the other refitted at each value) with the fit's root-mean-square
    relative miss on its cells, and the verify reads across theirs with the held-out speculative cells' median miss
    (no value fitted there: the mechanism's reads marked); a best value at a range's end is a bound."""
    found = fitted_matrix(stored)
    if found is None:
        return pd.DataFrame()
    matrix, fit = found
    rows = []
    for name, best in (("per_pass", fit.per_pass), ("per_stream", fit.per_stream)):
        top = max(best * 3, 1e-3)
        for value in np.linspace(0.0, top, PROFILE_POINTS):
            other = _refit_other(matrix, fit, name, float(value))
            a0, a1 = (value, other) if name == "per_pass" else (other, value)
            misses = [_plain_rate(matrix, a0, a1, c, s) / matrix.plain[(c, s)] - 1 for c, s in fit.fit_cells]
            rows.append(
                {"parameter": name, "value": float(value), "rms_miss": float(np.sqrt(np.mean(np.square(misses))))}
            )
    for reads in np.linspace(1.0, 2 * fit.reads_per_cycle, PROFILE_POINTS):
        alt = AttentionFit(**{**fit.__dict__, "reads_per_cycle": float(reads), "jackknife": ()})
        misses = [abs(r["spec_mid"] / r["reported"] - 1) for r in _spec_cells(matrix, alt)]
        rows.append({"parameter": "reads_per_cycle", "value": float(reads), "rms_miss": float(np.median(misses))})
    frame = pd.DataFrame(rows)
    used = {"per_pass": fit.per_pass, "per_stream": fit.per_stream, "reads_per_cycle": fit.reads_per_cycle}
    frame["used"] = frame["parameter"].map(used)
    for _name, part in frame.groupby("parameter"):
        best = part.loc[part["rms_miss"].idxmin(), "value"]
        frame.loc[part.index, "best"] = best
        frame.loc[part.index, "at_bound"] = best in (part["value"].min(), part["value"].max())
    return frame


def _refit_other(matrix: ContextMatrix, fit: AttentionFit, fixed: str, value: float) -> float:
    """The least-squares value of the other plain parameter with ``fixed`` held at ``value``."""
    num = den = 0.0
    for context, streams in fit.fit_cells:
        added = _added(matrix, context)
        y = _step_ms(matrix.plain, context, streams) - _step_ms(matrix.plain, matrix.anchor, streams)
        if fixed == "per_pass":
            x, y = added * streams, y - added * value
        else:
            x, y = added, y - added * streams * value
        num, den = num + x * y, den + x * x
    return num / den


def _spec_cells(matrix: ContextMatrix, fit: AttentionFit) -> list[dict]:
    """The matrix's speculative cells beyond its anchor, reported beside the transfer's middle."""
    out = []
    for context in matrix.contexts:
        if context == matrix.anchor:
            continue
        for r in transferred(matrix, fit, context, matrix.streams):
            reported = matrix.spec.get((context, r.streams))
            if reported is not None:
                out.append({"reported": reported, "spec_mid": (r.spec_tokens_per_s.low + r.spec_tokens_per_s.high) / 2})
    return out
