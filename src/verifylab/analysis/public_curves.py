"""The public speculation curves as chapter 4 shows them: the finding in words, one row per curve (its role, box,
source and where its gain crosses 1, reported beside predicted) and one row per cell, read from
:func:`verifylab.model.public_speculation.public_check`."""

from __future__ import annotations

import pandas as pd

from verifylab.model.views import OverlapFit, check_summary

CURVE_NOTES = ("engine", "accept_source", "source")  # long texts shown as lettered notes below the curves' table


def finding_words(fit: OverlapFit | None, table: pd.DataFrame) -> str:
    """The overlap the fit curves gave and how the model meets the others, the case-study family's last."""
    if fit is None or table.empty:
        return "No public speculation curve of another model is stored: the routing overlap is priced at 0."
    summary = check_summary(table).set_index("curve")

    def described(role: str, error: bool = True) -> list[str]:
        rows = summary[summary["role"] == role]
        return [
            f"{r.model} on {r.hardware}, reported {r.reported}, predicted {r.predicted_middle}"
            + (f" (median error {r.median_error:.0%})" if error else "")
            for r in rows.itertuples()
        ]

    words = (
        f"The case study's answer takes a routing overlap of {fit.span.text(2)}, fitted on the public curves of other "
        f"models ({'; '.join(described('fit', error=False))}). At {fit.best:g} the model already prices those gains "
        f"high by a median {fit.median_error[fit.best]:.0%} and more overlap only raises them, so the fit sits at its "
        "lower bound: no sharing of experts within a chain shows through what else these boxes spend."
    )
    held = described("held out")
    if held:
        words += f" Held out of the fit: {'; '.join(held)}."
    family = described("family check")
    if family:
        words += (
            f" The case-study family's public curve, never in a fit: {'; '.join(family)}. Each predicted gain is over "
            "the curve's own plain decoding, whose rate jumps at one load (the predicted gain dips below 1 there and "
            "comes back); measure plain decoding at every load on your own box before reading a crossover."
        )
    return words


def curves_view(table: pd.DataFrame) -> pd.DataFrame:
    """One row per curve: role, model, box, drafter, accept length, median error, crossings reported beside
    predicted, and (for :data:`CURVE_NOTES`) engine, how the accept length was read and the source."""
    if table.empty:
        return pd.DataFrame()
    summary = check_summary(table)
    first = table.groupby("curve", sort=False).first()

    def of(column: str) -> pd.Series:
        return summary["curve"].map(first[column])

    drafter = of("drafter").str.upper().str.replace("EAGLE3", "EAGLE-3")
    return pd.DataFrame(
        {
            "role": summary["role"],
            "model": summary["model"],
            "hardware": summary["hardware"],
            "drafter": drafter + ", " + of("verify_tokens").astype(str) + " verify tokens",
            "accept_length": of("accept"),
            "median_error_pct": (100 * summary["median_error"]).round(0).astype(int),
            "reported": summary["reported"],
            "predicted_middle": summary["predicted_middle"],
            "predicted_range_stops": summary["predicted_range_stops"],
            "engine": of("engine"),
            "accept_source": of("accept_source"),
            "source": "published " + of("published") + ": " + of("url"),
            "provenance": "reported (public); modelled",
        }
    )


def cells_view(table: pd.DataFrame) -> pd.DataFrame:
    """One row per public cell: the reported gain beside the model's range, its error, its source and quotes."""
    if table.empty:
        return pd.DataFrame()
    return pd.DataFrame(
        {
            "role": table["role"],
            "model": table["model"],
            "streams": table["streams"],
            "plain (tok/s)": table["plain_tok_s"],  # as the source gives them: 251 stays 251, never 251.0
            "speculative (tok/s)": table["spec_tok_s"],
            "reported_gain": table["gain"].round(2),
            "predicted_gain": [
                f"{lo:.2f}-{hi:.2f}" for lo, hi in zip(table["predicted_low"], table["predicted_high"], strict=True)
            ],
            "error_pct": (100 * table["error"]).round(0).astype(int),
            "source_and_quote": [
                f"{url} “{plain}”" + (f" “{spec}”" if spec != plain else "")
                for url, plain, spec in zip(table["url"], table["quote_plain"], table["quote_spec"], strict=True)
            ],
            "provenance": "reported (public); modelled",
        }
    )
