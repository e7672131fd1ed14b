"""The one way verifylab writes a CSV (the book's exports, a trace's steps, the gate tables, a run's CSV tables): a text
cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is neutralised with a leading apostrophe
(OWASP's rule against formula injection), so a label, a kernel name or a wheel's text can never run as a formula in
a spreadsheet; numbers stay numbers (a plain number such as ``-3.5`` is left as it is). A text that already starts
with an apostrophe gets a second one, so :func:`restore_cell` gives every cell back exactly when verifylab reads its
own CSV again."""

from __future__ import annotations

import re

import pandas as pd

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


# A spreadsheet that splits on ``;`` or a tab (a locale's CSV) starts a cell after each: a formula start there, or an
# apostrophe (kept exact), gets an apostrophe of its own
_INNER_START = re.compile(r"([;\t])(?=['=+\-@])")
_INNER_NEUTRAL = re.compile(r"([;\t])'(?=['=+\-@])")


def neutral_cell(value: object) -> object:
    """``value`` as a spreadsheet may read it safely: a text starting a formula (or an apostrophe) gets a leading
    ``'``, and so does every part a ``;``- or tab-splitting spreadsheet would start after its separator."""
    if not isinstance(value, str):
        return value
    value = _INNER_START.sub(r"\1'", value)
    if (value.startswith(FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value)) or value.startswith("'"):
        return "'" + value
    return value


def restore_cell(value: object) -> object:
    """The cell :func:`neutral_cell` was given (a CSV verifylab wrote, read again); any other value unchanged."""
    if not isinstance(value, str):
        return value
    if value.startswith("'") and value[1:2] in (*FORMULA_START, "'"):
        value = value[1:]
    return _INNER_NEUTRAL.sub(r"\1", value)


def is_text_column(column: pd.Series) -> bool:
    """Whether a column holds text cells (object or string dtype): the cells a CSV's writer neutralises, its reader
    restores and a public table's reader sends through the secret detector."""
    return column.dtype == object or pd.api.types.is_string_dtype(column)


def csv_text(frame: pd.DataFrame, lineterminator: str = "\r\n") -> str:
    """``frame`` as CSV text with every text cell (and column name) neutralised; RFC 4180's CRLF unless a data
    file asks for ``\\n``."""
    safe = frame.copy()
    safe.columns = [neutral_cell(str(c)) for c in safe.columns]
    for column in safe.columns:
        if is_text_column(safe[column]):
            safe[column] = safe[column].map(neutral_cell)
    return safe.to_csv(index=False, lineterminator=lineterminator)


def restored(frame: pd.DataFrame) -> pd.DataFrame:
    """A CSV verifylab wrote, read again: each text cell and column name as it was before :func:`csv_text`."""
    frame = frame.rename(columns=lambda c: restore_cell(c) if isinstance(c, str) else c)
    for column in frame.columns:  # a text column none of whose cells was neutralised (most) is left as read
        if is_text_column(frame[column]) and any(_neutralised(v) for v in frame[column].tolist()):
            frame[column] = frame[column].map(restore_cell)
    return frame


def _neutralised(value: object) -> bool:
    """Whether :func:`restore_cell` may change ``value``: a text with an apostrophe at its start or after a
    separator (a superset of what it restores)."""
    return isinstance(value, str) and (value.startswith("'") or ";'" in value or "\t'" in value)
