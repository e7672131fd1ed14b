"""One table renderer for the book: human headers with units, numbers rounded by quantity, "—" for what has no
value (with a footnote), lists joined, no index. Words never break inside: how wide each column may be, which
identifiers wrap and how many rows show before a fold are :mod:`verifylab.report.table_fit`'s; here the cells become
HTML (full text on hover and in the export), long texts become notes or listings below the table, one-value
columns of a table too wide a line above it, and a prose column may read as a full-width line under its row.

A :class:`Table` displays as that HTML and also carries its cells as data (a verifylab MIME type the page
ignores), so the exports are written from the very object the page shows.
"""

from __future__ import annotations

import html
import math
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from verifylab.report.table_fit import (
    CELL_PAD_CHARS,
    CHAR_PX,
    COLUMN_PX,
    NOTE_CHARS,
    NUMBER_WORD,
    WIDE,
    fit_limits,
    kernel_head,
    visible_rows,
    word_limits,
    word_width,
)

TABLE_MIME = "application/vnd.verifylab.table+json"
EMPTY = "—"
EMPTY_NOTE = f"{EMPTY}: no value (not measured, not applicable or not reported)."
FOLD_AT_LEAST = 2  # a table one or two rows past a screen shows them: a fold hiding one row costs the reader a click
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


_BREAKS = re.compile(r"[-/?!(){}\[\]|+%…–—:=,;]")
CODE_SPAN = re.compile(r"`([^`]+)`")  # `verifylab gates apply` in a rule's text: set as code, never as backticks


def _with_code_spans(text: str, plain: Callable[[str], str]) -> str:
    """``text`` with its backticked spans set as (escaped) code and the rest as ``plain`` makes it."""
    pieces = enumerate(CODE_SPAN.split(text))  # odd pieces were between backticks
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else plain(p) for i, p in pieces)


def code_spans_html(text: str) -> str:
    """Escaped ``text`` with its backticked spans set as code."""
    return _with_code_spans(text, html.escape)


URL = re.compile(r"https?://[^\s<>\"'`]+")  # a source a reader follows: set as a link, shown whole


def _link(url: str, chars: int = 24) -> str:
    """A URL as a link a reader can follow (escaped in both places), wrapping after its separators and within
    ``chars`` characters."""
    shown = _wrap_points(url, chars)
    return (
        f'<a class="reference external" href="{html.escape(url, quote=True)}"><span class="v-wrap">{shown}</span></a>'
    )


def _whole_words(text: str) -> str:
    """Escaped ``text``, each word a browser would break after a character of it kept on one line; a URL a link."""

    def word(part: str) -> str:
        if URL.fullmatch(part):
            return _link(part)
        whole = _BREAKS.search(part) and len(part) > 2 and word_width(part) == len(part)
        return f'<span class="v-word">{html.escape(part)}</span>' if whole else html.escape(part)

    return "".join(word(p) for p in re.split(r"(\s+)", text))


def _words_html(text: str) -> str:
    """Escaped text whose words never break inside: a word with a character browsers break after (``-``,
    ``/``, ``(``) is kept whole (``v-word``), except a hyphenated word of prose, which may break after its
    hyphens; lines break between words only. Backticked spans are set as code."""
    return _with_code_spans(text, _whole_words)


def _fitted_words(text: str, chars: int) -> str:
    """Escaped ``text`` as :func:`_whole_words` sets it, except that a word wider than the column's ``chars`` (a
    run id, a path, a flag; never a number) wraps after its separators: shown whole, never cut."""

    def word(part: str) -> str:
        if URL.fullmatch(part):
            return _link(part, chars)
        if part.isspace() or NUMBER_WORD.fullmatch(part) or word_width(part) <= chars:
            return _whole_words(part)
        return f'<span class="v-wrap">{_wrap_points(part, chars)}</span>'

    return "".join(word(p) for p in re.split(r"(\s+)", text))


_SEPARATOR = re.compile(r"([-_/.:,=])")  # where an identifier too wide for its column wraps


def _wrap_points(word: str, chars: int) -> str:
    """``word`` escaped, with a line-break opportunity (``<wbr>``) after each separator and inside any piece still
    longer than ``chars`` (a hash): the browser wraps it there and nowhere else; every character stays."""
    pieces = [p for p in _SEPARATOR.split(word) if p]
    chunks: list[str] = []
    for piece in pieces:
        if chunks and _SEPARATOR.fullmatch(piece):
            chunks[-1] += piece
        else:
            chunks += [piece[i : i + max(chars, 1)] for i in range(0, len(piece), max(chars, 1))]
    return "<wbr>".join(html.escape(chunk) for chunk in chunks)


def _cell(text: str, chars: int, tag: str = "td", span: int = 0) -> str:
    """One cell: its words whole; a word longer than the column's ``chars`` wrapped after its separators (never
    cut); a kernel signature without its template arguments, the full text on hover (the export keeps it whole);
    a cell moved below the table (``\\0listing 1\\0text``) shows its pointer; ``span``: the cell is a
    full-width line of that many columns."""
    if text.startswith("\0"):
        _, pointer, full = text.split("\0", 2)
        return f'<{tag}><span title="{html.escape(full)}">{html.escape(pointer)}</span></{tag}>'
    shown = kernel_head(text)
    prose = len(text) > NOTE_CHARS or span  # prose reads left-aligned
    opening = f"<{tag}" + (f' colspan="{span}"' if span else "") + (' class="v-prose">' if prose else ">")
    body = _with_code_spans(shown, lambda plain: _fitted_words(plain, chars))
    if shown != text:
        return f'{opening}<span title="{html.escape(text)}">{body}</span></{tag}>'
    return f"{opening}{body}</{tag}>"


@dataclass
class Table:
    """A DataFrame as the book shows it."""

    frame: pd.DataFrame
    listed: tuple[str, ...] = ()  # columns (by name) shown as listings below the table: commands, long code
    noted: tuple[str, ...] = ()  # columns (by name) whose long texts become lettered notes below the table
    spanned: str | None = None  # a prose column (by name) read as a full-width line under each row

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

    def html(self, cells: pd.DataFrame) -> str:
        """The page's HTML of ``cells`` (:meth:`cells`), with this table's listings, notes and spanned column."""
        listed, noted = tuple(header(c) for c in self.listed), tuple(header(c) for c in self.noted)
        return cells_html(cells, listed, noted, header(self.spanned) if self.spanned else None)

    def _repr_html_(self) -> str:
        return self.html(self.cells())

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        cells = self.cells()
        return {"text/html": self.html(cells), TABLE_MIME: cells_data(cells)}


def noted_to_fit(cells: pd.DataFrame, noted: tuple[str, ...] = (), column_px: float = COLUMN_PX) -> tuple[str, ...]:
    """``noted`` and, where the table would otherwise wrap words of prose, its long-text columns (the
    longest texts first; never the first column, nor the one with the longest texts: the table's prose gets
    the width) until every word of prose fits whole."""
    noted = tuple(c for c in noted if c in cells.columns)
    lengths = cells.map(lambda v: 0 if str(v).startswith("\0") else len(str(v)))
    main = lengths.mean().idxmax() if len(cells) else None
    while not fit_limits(_shown(_notes(cells, noted)[0]), column_px)[1]:
        candidates = [c for c in cells.columns[1:] if c not in noted and c != main and lengths[c].max() > NOTE_CHARS]
        if not candidates:
            break
        noted += (max(candidates, key=lambda c: lengths[c].mean()),)
    return noted


def _shown(cells: pd.DataFrame) -> pd.DataFrame:
    """What the cells show: a cell moved below the table shows its pointer (``listing 1``, ``note a``)."""
    return cells.map(lambda v: str(v).split("\0")[1] if str(v).startswith("\0") else v)


def _rows_html(cells: pd.DataFrame, limits: list[int], lines_under: list[str] | None = None) -> str:
    """The rows' HTML; with ``lines_under``, each row followed by its full-width line."""
    rows = []
    for i, row in enumerate(cells.itertuples(index=False)):
        lead = "".join(_cell(v, n) for v, n in zip(row, limits, strict=True))
        if lines_under is None:
            rows.append(f"<tr>{lead}</tr>")
        else:
            room = int(COLUMN_PX / CHAR_PX) - CELL_PAD_CHARS
            line = _cell(lines_under[i], room, span=len(limits))
            rows.append(f'<tr class="v-lead">{lead}</tr><tr class="v-under">{line}</tr>')
    return "".join(rows)


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
            shown.iloc[i, cells.columns.get_loc(column)] = f"\0listing {number}\0{text}"
            blocks.append(
                f'<p class="verifylab-listing-title">Listing {number} ({html.escape(column)}, '
                f"{html.escape(str(cells.iloc[i, 0]))})</p><pre>{html.escape(listing_text(text))}</pre>"
            )
    return shown, "".join(blocks)


def _notes(cells: pd.DataFrame, noted: tuple[str, ...]) -> tuple[pd.DataFrame, str]:
    """``cells`` with each long cell of a ``noted`` column replaced by ``note a`` (one letter per distinct text,
    in order of first use), and the notes' HTML to show below the table."""
    shown, letters = cells.copy(), dict[str, str]()
    columns = [j for j, c in enumerate(cells.columns) if c in noted]
    for i in range(len(cells)):  # lettered in reading order: row by row, left to right
        for j in columns:
            text = cells.iat[i, j]
            if len(text) > NOTE_CHARS and not text.startswith("\0"):  # a listing's pointer stays
                letter = letters.setdefault(text, _note_label(len(letters)))
                shown.iat[i, j] = f"\0note {letter}\0{text}"
    items = "".join(
        f'<p class="verifylab-table-note verifylab-note"><b>note {label}</b>: {_words_html(text)}</p>'
        for text, label in letters.items()
    )
    return shown, items


def _note_label(n: int) -> str:
    """a, b, ... z, aa, ab, ...: the ``n``-th note's label."""
    letters = string.ascii_lowercase
    return letters[n] if n < len(letters) else _note_label(n // len(letters) - 1) + letters[n % len(letters)]


def cells_html(
    cells: pd.DataFrame, listed: tuple[str, ...] = (), noted: tuple[str, ...] = (), spanned: str | None = None
) -> str:
    """The HTML of a table's cells (:meth:`Table.cells`): no word broken; rows past a screen folded under "Show
    the other N rows" (header repeated, the rows in a box of at most a screen that scrolls, so the page keeps its
    length when they are shown; a remainder of :data:`FOLD_AT_LEAST` rows or fewer is shown, not folded);
    ``listed`` columns as listings below it, ``noted`` columns' long texts as lettered notes, the ``spanned``
    column as a full-width line under each row; the footnote when a cell is empty."""
    everything = cells
    under = [str(v) for v in cells[spanned]] if spanned in cells.columns else None
    if under is not None:
        cells = cells.drop(columns=[spanned])
    cells, common = _lift_constants(cells, listed + noted)
    cells, listings = _listings(cells, listed)
    cells, notes = _notes(cells, noted_to_fit(cells, noted))
    compact = _shown(cells)
    limits = word_limits(compact)
    head = "<tr>" + "".join(_cell(str(c), 10**6, "th") for c in cells.columns) + "</tr>"
    if under is not None:
        head += f'<tr class="v-under">{_cell(str(spanned), 10**6, "th", span=len(cells.columns))}</tr>'
    head = f"<thead>{head}</thead>"
    classes = "verifylab-table wide" if len(cells.columns) > WIDE else "verifylab-table"
    classes += " v-spanned" if under is not None else ""
    shown = visible_rows(compact, limits, lines_under=under)
    shown = len(cells) if len(cells) - shown <= FOLD_AT_LEAST else shown  # two rows more are shown, not folded

    def body(rows: slice) -> str:
        return _rows_html(cells.iloc[rows], limits, None if under is None else under[rows])

    out = common + f'<table class="{classes}">{head}<tbody>{body(slice(0, shown))}</tbody></table>'
    if shown < len(cells):
        out += (
            f'<details class="verifylab-more"><summary>Show the other {len(cells) - shown} rows of this table'
            f'</summary><div class="v-rows"><table class="{classes} v-more">{head}<tbody>{body(slice(shown, None))}'
            "</tbody></table></div></details>"
        )
    blank = (everything == EMPTY).to_numpy().any()
    note = f'<p class="verifylab-table-note">{html.escape(EMPTY_NOTE)}</p>' if blank else ""
    empty = "" if len(cells) else '<p class="verifylab-table-note">No rows.</p>'
    return out + empty + note + notes + listings


def _lift_constants(cells: pd.DataFrame, kept: tuple[str, ...]) -> tuple[pd.DataFrame, str]:
    """Where a table cannot keep its words whole in the narrowest column, the columns (never the first, nor
    ``kept``) that hold one value in every row leave it for a line above it ("Every row: run id …"); the
    export keeps them as columns."""
    if len(cells) < 2 or fit_limits(cells, COLUMN_PX)[1]:  # before listings and notes: every cell is its text
        return cells, ""
    same = [c for c in cells.columns[1:] if c not in kept and cells[c].nunique() == 1 and cells[c].iloc[0] != EMPTY]
    if not same:
        return cells, ""
    values = {str(c): str(cells[c].iloc[0]) for c in same}
    parts = "; ".join(
        f'<span class="v-constant" data-column="{html.escape(c)}" data-value="{html.escape(v)}">'
        f"{html.escape(c)}: {_words_html(v)}</span>"
        for c, v in values.items()
    )
    return cells.drop(columns=same), f'<p class="verifylab-table-note verifylab-table-common">Every row: {parts}.</p>'


def cells_data(cells: pd.DataFrame) -> dict:
    """A table's cells as the exports read them: ``{"columns": [...], "rows": [[...], ...]}``."""
    return {"columns": list(cells.columns), "rows": cells.to_numpy().tolist()}


def as_table(value: Any) -> Any:
    """A DataFrame as a :class:`Table`; anything else unchanged."""
    return Table(value) if isinstance(value, pd.DataFrame) else value
