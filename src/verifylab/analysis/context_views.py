"""Context length as chapter 4 shows it: the finding in words, the fitted terms, where speculation stops paying per
matrix and context (reported beside predicted), every cell, and the error profiles, from
:mod:`verifylab.model.fits.context`. Every number of the words is the text of a cell of these tables."""

from __future__ import annotations

import math

import pandas as pd

from verifylab.model.views import context_check, crossover_check, fitted_matrix, stored_inputs
from verifylab.report.tables import Table, header
from verifylab.sources import ModelSources

PROVENANCE = "reported (public); modelled"


def _range(low: float | None, high: float | None, digits: int = 1) -> str:
    if low is None or high is None or (isinstance(low, float) and math.isnan(low)):
        return "beyond the streams measured"
    return f"{low:.{digits}f}" if round(low, digits) == round(high, digits) else f"{low:.{digits}f}-{high:.{digits}f}"


def _crossings(found: list[tuple[float, str]]) -> str:
    return "; ".join(f"{word} at {at:.1f}" for at, word in found) or "pays at every stream count"


def fit_view(ev: ModelSources) -> pd.DataFrame:
    """The fitted terms and what the fit assumed: one row per term."""
    found = fitted_matrix(stored_inputs(ev))
    if found is None:
        return pd.DataFrame()
    matrix, fit = found
    rows = [
        ("per pass, per 1,000 tokens of context (µs)", f"{fit.per_pass * 1e3:.1f}",
         _range(fit.per_pass_band.low * 1e3, fit.per_pass_band.high * 1e3),
         f"fitted on {len(fit.fit_cells)} plain cells"),
        ("per stream, per 1,000 tokens of context (µs)", f"{fit.per_stream * 1e3:.1f}",
         _range(fit.per_stream_band.low * 1e3, fit.per_stream_band.high * 1e3),
         f"fitted on {len(fit.fit_cells)} plain cells"),
        ("reads of each stream's context per verify cycle", f"{fit.reads_per_cycle:.2f}", None,
         f"not fitted: once per verified token ({fit.verify_tokens}) and the draft's passes ({fit.draft_reads:.2f})"),
        ("accept length (stated before the fit)", matrix.accept.text(2), None, matrix.accept_note),
        ("KV pools the page states (tokens, without / with speculation)",
         f"{matrix.plain_pool_tokens:,} / {matrix.spec_pool_tokens:,}", None,
         "its prompts share one prefix, so no cell queued: not priced on it"),
    ]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["term", "value", "leave_one_out", "how"])
    return frame.assign(source=f"{matrix.name}: {matrix.source}", provenance=PROVENANCE)


def crossover_view(ev: ModelSources) -> pd.DataFrame:
    """Per matrix and context: every reported crossing of 1, where it stops paying for good, the predicted band,
    whether it holds the reported one."""
    check = crossover_check(stored_inputs(ev))
    if check.empty:
        return pd.DataFrame()
    return pd.DataFrame(
        {
            "matrix": check["matrix"],
            "context": check["context_label"],
            "role": check["role"],
            "reported_crossings": [_crossings(c) for c in check["reported_crossings"]],
            "reported_stops_for_good": [
                "ends paying" if r is None or (isinstance(r, float) and math.isnan(r)) else f"{r:.1f}"
                for r in check["reported_stops"]
            ],
            "predicted": [
                _range(lo, hi) for lo, hi in zip(check["predicted_low"], check["predicted_high"], strict=True)
            ],
            "inside": [
                "—" if i is None or (isinstance(i, float) and math.isnan(i)) else ("yes" if i else "no")
                for i in check["inside"]
            ],
            "width": check["width"].round(2),
            "provenance": PROVENANCE,
        }
    )


def cells_view(ev: ModelSources) -> pd.DataFrame:
    """Every cell beside its prediction: role, plain and EAGLE-3 tok/s, the gain, reported and predicted."""
    cells = context_check(stored_inputs(ev))
    if cells.empty:
        return pd.DataFrame()
    return pd.DataFrame(
        {
            "matrix": cells["matrix"],
            "context": cells["context_label"],
            "streams": cells["streams"],
            "role": cells["role"],
            "plain_reported_tokens_per_s": cells["plain_reported"],
            "plain_predicted": [
                _range(lo, hi, 0) for lo, hi in zip(cells["plain_low"], cells["plain_high"], strict=True)
            ],
            "eagle3_reported_tokens_per_s": cells["spec_reported"],
            "eagle3_predicted": [
                _range(lo, hi, 0) for lo, hi in zip(cells["spec_low"], cells["spec_high"], strict=True)
            ],
            "gain_reported": cells["gain_reported"].astype(float).round(2),
            "gain_predicted": [_range(lo, hi, 2) for lo, hi in zip(cells["gain_low"], cells["gain_high"], strict=True)],
            "provenance": PROVENANCE,
        }
    )


def held_out_miss(ev: ModelSources, matrix: str | None = None) -> float | None:
    """The median relative miss of the middles on the held-out cells (plain and EAGLE-3), of one matrix or all."""
    cells = context_check(stored_inputs(ev))
    if cells.empty:
        return None
    held = cells[cells["role"] == "held out"]
    if matrix is not None:
        held = held[held["matrix"] == matrix]
    misses = pd.concat([held["plain_miss"], held["spec_miss"].dropna()]).astype(float).abs()
    return float(misses.median()) if not misses.empty else None


def context_words(ev: ModelSources) -> str:
    """The finding: the fitted terms, how the model meets what it never saw, what it assumed; every number quoted
    from :func:`fit_view` and :func:`crossover_view` or named here as the held-out miss."""
    found = fitted_matrix(stored_inputs(ev))
    if found is None:
        return "No public per-context matrix is stored: context is priced as each stream's KV bytes read once per pass."
    matrix, fit = found
    fits = Table(fit_view(ev)).cells()
    cross = crossover_view(ev)
    held = cross[(cross["role"] == "held out") & (cross["inside"] != "—")]
    inside = held[held["inside"] == "yes"]
    missed = held[held["inside"] == "no"]
    listed = "; ".join(
        f"{r.matrix} {r.context}: {r.reported_stops_for_good} within {r.predicted}" for r in inside.itertuples()
    )
    value = header("value")
    words = (
        f"On {matrix.gpus} x RTX PRO 6000 with {matrix.model.split(' (')[0]} ({matrix.attention} attention; public), "
        f"each 1,000 tokens of a stream's context add {fits[value].iloc[1]} µs per stream and {fits[value].iloc[0]} µs "
        f"per pass to a plain step, fitted on {len(fit.fit_cells)} plain cells up to 64k whose streams fit both KV "
        f"pools the page states; a verify cycle reads each stream's context {fits[value].iloc[2]} times (once per "
        "verified token and the draft's passes: not fitted). Moved from each matrix's own shortest-context row, the "
        f"model meets the held-out cells with a median miss of {held_out_miss(ev):.1%}, and where speculation stops "
        f"paying falls inside its predicted range in {len(inside)} of {len(held)} held-out contexts ({listed})"
    )
    if not missed.empty:
        words += "; it misses " + "; ".join(
            f"{r.matrix} {r.context} ({r.reported_stops_for_good} reported, {r.predicted} predicted)"
            for r in missed.itertuples()
        )
    words += (
        f". The accept length ({matrix.accept.text(2)}) is derived from the page's server-reported accept rates and "
        "stated before the fit; its prompts share one prefix, so its KV pools never queued a cell and no capacity is "
        "priced on it. The pricer takes these terms for every box the book prices; SGLang's own Triton verify, "
        "measured on one H200 below, costs far more per 1,000 tokens than this engine's: measure on the box before "
        "trusting a long-context answer for SGLang."
    )
    return words
