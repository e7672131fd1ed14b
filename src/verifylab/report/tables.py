"""One table renderer for the book: human headers with units, numbers rounded by quantity, "—" for what has no
value (with a footnote), lists joined, no index. Words never break inside: a column is as wide as its longest
word, and where the table would not fit the narrowest screen the longest words are shortened (full text on
hover and in the export); rows past a screen are folded away.

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
LONG_NAME = 56  # kernel signatures longer than this are cut before their template arguments
WIDE = 9  # a table with more columns is set smaller
# The narrowest text column (800 px screens: 736 px) and the type's widths, to fit words without breaking them.
COLUMN_PX = 700.0  # a little under the narrowest column: the browser's widths are not exactly these
CHAR_PX = 7.8  # widest average character of 0.8rem type (digits, run ids)
WIDE_SCALE = 0.875  # 0.7rem type in wide tables
CELL_PAD_CHARS = 2  # a cell's padding and border, in characters
MIN_WORD = 8  # no word is shortened below this (it would no longer say what it is)
LINE_PX, ROW_PAD_PX = 21.0, 7.0  # one line of 0.8rem type (with its leading), a row's padding
SCREEN_PX = 900.0  # rows past this estimated height are folded away
MIN_ROWS = 3  # a table with this many rows or fewer is never folded

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


def cell_text(column: str, value: Any, integral: bool | None = None) -> str:
    """The text a cell shows. A whole float prints as an integer only in a column of counts (``integral``; by
    default: a column without a unit): ``2,050.0`` beside ``2,005.1``, never ``2050``. Thousands separated."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return EMPTY
    if isinstance(value, list | tuple | set):
        return ", ".join(cell_text(column, v, integral) for v in value) or EMPTY
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        counts = integral if integral is not None else _unit(column) is None
        if counts and value.is_integer() and abs(value) < 1e15:
            return cell_text(column, int(value))
        return f"{value:,.{_decimals(column, value)}f}"
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        return cell_text(column, value.item(), integral)
    text = str(value)
    return text if text.strip() else EMPTY


def _integral(column: str, values: list) -> bool:
    """Whether a column holds counts: no unit, and every float in it whole."""
    floats = [v for v in values if isinstance(v, float) and not math.isnan(v)]
    return _unit(column) is None and all(v.is_integer() for v in floats)


def _kernel_head(text: str) -> str:
    """A kernel signature cut before its template arguments (``void f<128, ...>`` -> ``f…``); other text as is."""
    head = re.split(r"[<(]", re.sub(r"^(void|static|auto)\s+", "", text), maxsplit=1)[0].strip()
    if len(text) > LONG_NAME and head and " " not in head:
        return head[:LONG_NAME] + "…"
    return text


def shorten(word: str, chars: int) -> str:
    """``word`` in at most ``chars`` characters: a path keeps its last part (``…/overrides.py``), anything else
    its two ends (``20261201…probe-shm``)."""
    if len(word) <= chars:
        return word
    if "/" in word.rstrip("/"):
        tail = word.rstrip("/").rsplit("/", 1)[1]
        if len(tail) + 2 <= chars:
            return "…/" + tail
    head = max(1, (chars - 1) * 11 // 20)
    return word[:head] + "…" + word[len(word) - (chars - 1 - head) :]


_BREAKS = re.compile(r"[-/?!(){}\[\]|+%…–—:=,;]")


def _words_html(text: str) -> str:
    """Escaped text whose words never break inside: a word with a character browsers break after (``-``,
    ``/``, ``(``) is kept whole (``v-word``); lines break between words only."""
    parts = re.split(r"(\s+)", text)
    return "".join(
        f'<span class="v-word">{html.escape(p)}</span>' if _BREAKS.search(p) and len(p) > 2 else html.escape(p)
        for p in parts
    )


def _cell(text: str, chars: int, tag: str = "td") -> str:
    """One cell: its words whole; a word longer than the column's ``chars`` shortened, the full text on hover
    (the export keeps it whole); a listed cell (``\\0n\\0text``) points to its listing."""
    if text.startswith("\0"):
        _, number, full = text.split("\0", 2)
        return f'<{tag}><span title="{html.escape(full)}">listing {number}</span></{tag}>'
    words = _kernel_head(text).split(" ")
    shown = " ".join(w if NUMBER_WORD.fullmatch(w) else shorten(w, chars) for w in words)
    if shown != text:
        return f'<{tag}><span title="{html.escape(text)}">{_words_html(shown)}</span></{tag}>'
    return f"<{tag}>{_words_html(text)}</{tag}>"


@dataclass
class Table:
    """A DataFrame as the book shows it."""

    frame: pd.DataFrame
    listed: tuple[str, ...] = ()  # columns (by name) shown as listings below the table: commands, long code

    def cells(self) -> pd.DataFrame:
        """Every cell as its text, headers with units: what the page shows and the export holds. A meaningful
        index (named, or not 0..n-1: a pivot's rows, a variant per row) becomes the first column(s)."""
        frame = self.frame
        if frame.index.names != [None] or not pd.api.types.is_integer_dtype(frame.index):
            frame = frame.reset_index()  # a pivot's rows, a variant per row
        else:
            frame = frame.reset_index(drop=True)  # a plain or filtered row number (0, 1, 3, 4 ...) is never shown
        values = {c: frame[c].tolist() for c in frame.columns}
        shown = pd.DataFrame(
            {header(c): [cell_text(c, v, _integral(c, values[c])) for v in values[c]] for c in frame.columns},
            columns=[header(c) for c in frame.columns],
        )
        return shown.reset_index(drop=True)

    def _repr_html_(self) -> str:
        return cells_html(self.cells(), tuple(header(c) for c in self.listed))

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        cells = self.cells()
        return {"text/html": cells_html(cells, tuple(header(c) for c in self.listed)), TABLE_MIME: cells_data(cells)}


NUMBER_WORD = re.compile(r"[~<>=+−-]?[\d.,]+(?:[-–][\d.,]+)?[%x)]*[,;:]?")


def _longest(texts: list[str], numbers: bool | None = None) -> int:
    """The longest word of ``texts``: of every word, of numbers only (``True``) or of the rest (``False``)."""
    words = (w for t in texts for w in _kernel_head(t).split())
    return max((len(w) for w in words if numbers is None or bool(NUMBER_WORD.fullmatch(w)) == numbers), default=0)


def _char_px(cells: pd.DataFrame) -> float:
    return CHAR_PX * (WIDE_SCALE if len(cells.columns) > WIDE else 1.0)


def word_limits(cells: pd.DataFrame, column_px: float = COLUMN_PX) -> list[int]:
    """The longest word (characters) each column may show so that the table fits ``column_px`` without breaking
    a word: a column is as narrow as its longest word; where the sum is too wide, the longest words are
    shortened first (headers and numbers never are)."""
    room = column_px / _char_px(cells) - CELL_PAD_CHARS * len(cells.columns)
    heads = [max(_longest([str(c)]), _longest([str(v) for v in cells[c]], numbers=True)) for c in cells.columns]
    words = [_longest([str(v) for v in cells[c]], numbers=False) for c in cells.columns]
    cap = max(words, default=0)
    while cap > MIN_WORD and sum(max(h, min(w, cap)) for h, w in zip(heads, words, strict=True)) > room:
        cap -= 1
    return [max(h, min(w, cap)) for h, w in zip(heads, words, strict=True)]


def visible_rows(cells: pd.DataFrame, limits: list[int], column_px: float = COLUMN_PX) -> int:
    """How many rows to show before the rest is folded away: those that fit ``SCREEN_PX`` at an estimated line
    count per row (each column as wide as its words need plus a share of the room left); all of a short table."""
    if len(cells) <= MIN_ROWS:
        return len(cells)
    room = column_px / _char_px(cells) - CELL_PAD_CHARS * len(cells.columns)
    lengths = [max([len(str(c))] + [len(str(v)) for v in cells[c]]) for c in cells.columns]
    extra = [max(0, n - m) for n, m in zip(lengths, limits, strict=True)]
    spare = max(0.0, room - sum(limits))
    widths = [m + spare * e / (sum(extra) or 1) for m, e in zip(limits, extra, strict=True)]
    height = LINE_PX * 2  # the header
    for shown, row in enumerate(cells.itertuples(index=False)):
        lines = max(math.ceil(len(str(v)) / max(w, 1.0)) for v, w in zip(row, widths, strict=True))
        height += lines * LINE_PX + ROW_PAD_PX
        if height > SCREEN_PX:
            return max(1, shown)
    return len(cells)


def _rows_html(cells: pd.DataFrame, limits: list[int]) -> str:
    return "".join(
        "<tr>" + "".join(_cell(v, n) for v, n in zip(row, limits, strict=True)) + "</tr>"
        for row in cells.itertuples(index=False)
    )


def listing_text(text: str) -> str:
    """A listing as a reader copies it: a shell command one flag per line, continued with backslashes."""
    head, *flags = re.split(r" (?=--)", text)
    return " \\\n  ".join([head, *flags])


def _listings(cells: pd.DataFrame, listed: tuple[str, ...]) -> tuple[pd.DataFrame, str]:
    """``cells`` with each non-empty cell of a ``listed`` column replaced by a pointer to its listing, and the
    listings' HTML (numbered, named by the row's first cell) to show below the table."""
    shown, blocks, number = cells.copy(), [], 0
    for column in (c for c in listed if c in cells.columns):
        for i, text in enumerate(cells[column]):
            if text == EMPTY:
                continue
            number += 1
            shown.iloc[i, cells.columns.get_loc(column)] = f"\0{number}\0{text}"
            blocks.append(
                f'<p class="verifylab-listing-title">Listing {number} ({html.escape(column)}, '
                f"{html.escape(str(cells.iloc[i, 0]))})</p><pre>{html.escape(listing_text(text))}</pre>"
            )
    return shown, "".join(blocks)


def cells_html(cells: pd.DataFrame, listed: tuple[str, ...] = ()) -> str:
    """The HTML of a table's cells (:meth:`Table.cells`): no word broken; rows past a screen folded under "Show
    the other N rows" (header repeated); ``listed`` columns as listings below it; the footnote when a cell is
    empty."""
    cells, listings = _listings(cells, listed)
    compact = cells.map(lambda v: "listing 00" if str(v).startswith("\0") else v)  # what the cells show
    limits = word_limits(compact)
    head = "<thead><tr>" + "".join(_cell(str(c), 10**6, "th") for c in cells.columns) + "</tr></thead>"
    classes = "verifylab-table wide" if len(cells.columns) > WIDE else "verifylab-table"
    shown = visible_rows(compact, limits)
    out = f'<table class="{classes}">{head}<tbody>{_rows_html(cells.iloc[:shown], limits)}</tbody></table>'
    if shown < len(cells):
        rest = cells.iloc[shown:]
        out += (
            f'<details class="verifylab-more"><summary>Show the other {len(rest)} rows of this table</summary>'
            f'<table class="{classes} v-more">{head}<tbody>{_rows_html(rest, limits)}</tbody></table></details>'
        )
    note = f'<p class="verifylab-table-note">{html.escape(EMPTY_NOTE)}</p>' if (cells == EMPTY).to_numpy().any() else ""
    empty = "" if len(cells) else '<p class="verifylab-table-note">No rows.</p>'
    return out + empty + note + listings


def cells_data(cells: pd.DataFrame) -> dict:
    """A table's cells as the exports read them: ``{"columns": [...], "rows": [[...], ...]}``."""
    return {"columns": list(cells.columns), "rows": cells.to_numpy().tolist()}


def as_table(value: Any) -> Any:
    """A DataFrame as a :class:`Table`; anything else unchanged."""
    return Table(value) if isinstance(value, pd.DataFrame) else value
