"""The case study's reported figures read by id from their table (``data/reference/reported_figures.csv`` as the
evidence gives it: ``figure_id``, ``value``): a number for the model, the same number as prose shows it."""

from __future__ import annotations

import pandas as pd

from verifylab.errors import ReferenceDataError


def reported_value(figures: pd.DataFrame, figure_id: str) -> float:
    """The numeric value of one reported figure (a row of ``figures``: ``figure_id``, ``value``), by id."""
    match = figures.loc[figures["figure_id"] == figure_id, "value"]
    if match.empty or pd.isna(match.iloc[0]):
        raise ReferenceDataError(f"no numeric reported figure '{figure_id}' among the reported figures")
    return float(match.iloc[0])


def reported_text(figures: pd.DataFrame, figure_id: str) -> str:
    """One reported figure as prose shows it: as its table gives it (``54.1``, ``30``; never ``30.0``)."""
    return f"{reported_value(figures, figure_id):g}"
