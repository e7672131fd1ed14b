"""One table renderer for the book: human headers with units, numbers rounded by quantity, "—" for what has no
value (with a footnote), lists joined, long identifiers shortened with the full name on hover, no index.

A :class:`Table` displays as that HTML and also carries its cells as data (a verifylab MIME type the page
ignores), so the exports are written from the very object the page shows.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

TABLE_MIME = "application/vnd.verifylab.table+json"
EMPTY = "—"
EMPTY_NOTE = f"{EMPTY}: no value (not measured, not applicable or not reported)."
LONG_NAME = 56  # identifiers longer than this are shortened, the full name on hover
WIDE = 9  # a table with more columns is set smaller
SHORT_TOKEN = 16  # a cell this short without spaces ("closed", "12.34", a version) never breaks
PROSE_WORD = 16  # a cell whose words are all this short is prose: it wraps between words

UNITS = (  # column-name endings -> (unit shown in the header, decimals)
    ("_tokens_per_s", "tok/s", 1),
    ("tokens_per_s", "tok/s", 1),
    ("_per_s", "/s", 1),
    ("_ms", "ms", 2),
    ("_us", "µs", 1),
    ("_gbs", "GB/s", 1),
    ("_gb", "GB", 1),
    ("_pct", "%", 1),
    ("_bytes", "bytes", 0),
)


def _unit(column: str) -> tuple[str, str, int] | None:
    """The (ending, unit, decimals) a column name carries (``verify_ms``, ``verify_ms_low``), or None."""
    name = str(column)
    return next((u for u in UNITS if name.endswith(u[0]) or f"{u[0]}_" in name), None)


def header(column: str) -> str:
    """``verify_ms_low`` -> ``verify low (ms)``; other names lose their underscores."""
    unit = _unit(column)
    if unit is None:
        return str(column).replace("_", " ")
    base = str(column).replace(unit[0], "", 1).replace("_", " ").strip()
    return f"{base} ({unit[1]})" if base else unit[1]


def _decimals(column: str, value: float) -> int:
    unit = _unit(column)
    if unit is not None:
        return unit[2]
    magnitude = abs(value)
    return 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 0.1 else 4


def cell_text(column: str, value: Any) -> str:
    """The text a cell shows."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return EMPTY
    if isinstance(value, list | tuple | set):
        return ", ".join(cell_text(column, v) for v in value) or EMPTY
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}" if abs(value) >= 10_000 else str(int(value))
        return f"{value:,.{_decimals(column, value)}f}"
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        return cell_text(column, value.item())
    text = str(value)
    return text if text.strip() else EMPTY


def _cell(text: str) -> str:
    """One ``<td>``: a short token never breaks (class ``v-short``), prose breaks between words (``v-prose``);
    a cell with a long token (a path, a run id) may break anywhere so the table fits its column; a long
    identifier (a kernel name) is cut before its template arguments with the full name on hover."""
    if " " not in text.strip() and len(text) <= SHORT_TOKEN:
        return f'<td class="v-short">{html.escape(text)}</td>'
    if all(len(word) <= PROSE_WORD for word in text.split()):  # words: wrap between them, never inside one
        return f'<td class="v-prose">{html.escape(text)}</td>'
    shown = html.escape(text)
    head = re.split(r"[<(]", re.sub(r"^(void|static|auto)\s+", "", text), maxsplit=1)[0]
    if len(text) > LONG_NAME and head.strip() and " " not in head.strip():  # an identifier (a kernel), not prose
        cut = head[:LONG_NAME] + "…"
        shown = f'<span title="{html.escape(text)}">{html.escape(cut)}</span>'
    return f"<td>{shown}</td>"


@dataclass
class Table:
    """A DataFrame as the book shows it."""

    frame: pd.DataFrame

    def cells(self) -> pd.DataFrame:
        """Every cell as its text, headers with units: what the page shows and the export holds. A meaningful
        index (named, or not 0..n-1: a pivot's rows, a variant per row) becomes the first column(s)."""
        frame = self.frame
        if frame.index.names != [None] or not isinstance(frame.index, pd.RangeIndex):
            frame = frame.reset_index()
        shown = pd.DataFrame(
            {header(c): [cell_text(c, v) for v in frame[c].tolist()] for c in frame.columns},
            columns=[header(c) for c in frame.columns],
        )
        return shown.reset_index(drop=True)

    def _repr_html_(self) -> str:
        return cells_html(self.cells())

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        cells = self.cells()
        return {"text/html": cells_html(cells), TABLE_MIME: cells_data(cells)}


def cells_html(cells: pd.DataFrame) -> str:
    """The HTML of a table's cells (:meth:`Table.cells`), with the footnote when a cell is empty."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cells.columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in cells.itertuples(index=False))
    note = f'<p class="verifylab-table-note">{html.escape(EMPTY_NOTE)}</p>' if (cells == EMPTY).to_numpy().any() else ""
    empty = "" if len(cells) else '<p class="verifylab-table-note">No rows.</p>'
    classes = "verifylab-table wide" if len(cells.columns) > WIDE else "verifylab-table"
    return f'<table class="{classes}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{empty}{note}'


def cells_data(cells: pd.DataFrame) -> dict:
    """A table's cells as the exports read them: ``{"columns": [...], "rows": [[...], ...]}``."""
    return {"columns": list(cells.columns), "rows": cells.to_numpy().tolist()}


def as_table(value: Any) -> Any:
    """A DataFrame as a :class:`Table`; anything else unchanged."""
    return Table(value) if isinstance(value, pd.DataFrame) else value
