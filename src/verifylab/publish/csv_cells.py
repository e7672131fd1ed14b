"""The one way a table leaves the book as CSV (the exports a reader opens in a spreadsheet): a text cell that starts
with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is neutralised with a leading apostrophe (OWASP's rule
against formula injection), so a label or a public row can never run as a formula; numbers stay numbers (a text
cell that is a plain number, ``-3.5``, is left as it is)."""

from __future__ import annotations

import re

import pandas as pd

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def neutral_cell(value: object) -> object:
    """``value`` as a spreadsheet may read it safely: a text starting a formula gets a leading ``'``."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_text(frame: pd.DataFrame) -> str:
    """``frame`` as CSV text with every text cell (and column name) neutralised."""
    safe = frame.copy()
    safe.columns = [neutral_cell(str(c)) for c in safe.columns]
    for column in safe.columns:
        if safe[column].dtype == object or pd.api.types.is_string_dtype(safe[column]):
            safe[column] = safe[column].map(neutral_cell)
    return safe.to_csv(index=False, lineterminator="\r\n")  # RFC 4180: a cell holding a CR is quoted too
