"""Fitting a table into the book's narrowest text column without breaking a word: how wide a word is, the
longest word each column may show on one line (identifiers give way first and wrap after their separators, then
words of prose, then short identifiers), and how many rows fit a screen before the rest is folded away."""

from __future__ import annotations

import math
import re

import pandas as pd

LONG_NAME = 56  # kernel signatures longer than this are cut before their template arguments
WIDE = 8  # a table with more columns is set smaller
# The narrowest text column (800 px screens: 736 px) and the type's widths, to fit words without breaking them.
COLUMN_PX = 700.0  # a little under the narrowest column: the browser's widths are not exactly these
CHAR_PX = 7.8  # widest average character of 0.8rem type (digits, run ids)
WIDE_SCALE = 0.875  # 0.7rem type in wide tables
CELL_PAD_CHARS = 2  # a cell's padding and border, in characters
NOTE_CHARS = 24  # a noted column's cell longer than this becomes a note
MIN_WORD = 8  # no column's one-line word is narrower than this (an identifier wraps in pieces at least this long)
KEEP_WHOLE = 20  # an identifier this short (NCCL_P2P_DISABLE, a version) never wraps: long-text columns
# become notes instead; run ids, paths and kernel names, longer, may be
LINE_PX, ROW_PAD_PX = 21.0, 7.0  # one line of 0.8rem type (with its leading), a row's padding
SCREEN_PX = 900.0  # rows past this estimated height are folded away
MIN_ROWS = 3  # a table with this many rows or fewer is never folded


NUMBER_WORD = re.compile(r"(?:\d{4}-\d\d-\d\d|[~<>=+−-]?[\d.,]+(?:[-–][\d.,]+)?[%x)]*)[,;:]?")  # or a date
# A word of prose ("approximately", "FlashInfer's", "all-reduces,"): letters, hyphens and apostrophes between
# brackets or quotes and trailing punctuation. Wrapped only when a table cannot fit otherwise.
PLAIN_WORD = re.compile(r"[(\"'“‘]?[A-Za-z]+(?:[-'’][A-Za-z]+)*[)\"'”’,;:.!?]*")
SHORT_WORD = re.compile(rf"\S{{1,{KEEP_WHOLE}}}")  # any word of up to KEEP_WHOLE characters


def _longest(texts: list[str], kind: re.Pattern | None = None, of_kind: bool = True) -> int:
    """The longest word of ``texts``: of every word, or of the words that are (``of_kind``) or are not a
    ``kind`` (:data:`NUMBER_WORD`, :data:`PLAIN_WORD`)."""
    words = (w for t in texts for w in kernel_head(t).split())
    return max((word_width(w) for w in words if kind is None or bool(kind.fullmatch(w)) == of_kind), default=0)


def char_px(cells: pd.DataFrame) -> float:
    return CHAR_PX * (WIDE_SCALE if len(cells.columns) > WIDE else 1.0)


def _water_fill(heads: list[int], words: list[int], room: float) -> list[int]:
    """Each column's limit: its ``heads`` whole, its other ``words`` capped at one length, the longest first,
    until the columns fit ``room`` (or the cap reaches :data:`MIN_WORD`)."""
    cap = max(words, default=0)
    while cap > MIN_WORD and sum(max(h, min(w, cap)) for h, w in zip(heads, words, strict=True)) > room:
        cap -= 1
    return [max(h, min(w, cap)) for h, w in zip(heads, words, strict=True)]


def fit_limits(cells: pd.DataFrame, column_px: float) -> tuple[list[int], bool]:
    """:func:`word_limits`, and whether they keep every word of prose whole."""
    room = column_px / char_px(cells) - CELL_PAD_CHARS * len(cells.columns)
    texts = {c: [str(v) for v in cells[c]] for c in cells.columns}
    fixed = [max(_longest([str(c)]), _longest(texts[c], NUMBER_WORD)) for c in cells.columns]
    short = [max(f, _longest(texts[c], SHORT_WORD)) for f, c in zip(fixed, cells.columns, strict=True)]
    plain = [_longest(texts[c], PLAIN_WORD) for c in cells.columns]
    other = [_longest(texts[c], NUMBER_WORD, of_kind=False) for c in cells.columns]
    # what gives way, in turn: long identifiers; then words of prose; then short identifiers too
    whole = _water_fill([max(s, p) for s, p in zip(short, plain, strict=True)], other, room)
    if sum(whole) <= room:
        return whole, True
    limits = _water_fill(short, other, room)
    return (limits, False) if sum(limits) <= room else (_water_fill(fixed, other, room), False)


def word_limits(cells: pd.DataFrame, column_px: float = COLUMN_PX) -> list[int]:
    """The longest word (characters) each column may show on one line so that the table fits ``column_px``: a
    column is as narrow as its longest word; where the sum is too wide, identifiers (run ids, paths, kernel names)
    give way, the longest first (they wrap after their separators, whole); headers, numbers, words of prose and
    identifiers of up to :data:`KEEP_WHOLE` characters stay on one line unless the table cannot fit otherwise."""
    return fit_limits(cells, column_px)[0]


def kernel_head(text: str) -> str:
    """A kernel signature cut before its template arguments (``void f<128, ...>`` -> ``f…``); other text as is."""
    signature = re.match(r"(?:(?:void|static|auto)\s+)?([A-Za-z_][\w:]*)[<(]", text)  # an identifier, then < or (
    if len(text) > LONG_NAME and signature:
        return signature.group(1)[:LONG_NAME] + "…"
    return text


def word_width(word: str) -> int:
    """The characters a word needs on one line: a hyphenated word of prose (``all-to-all``) its longest piece
    up to a hyphen, since it may break after one; any other word its whole length."""
    if "-" in word and PLAIN_WORD.fullmatch(word):
        return max(len(piece) for piece in re.split(r"(?<=-)", word))
    return len(word)


def visible_rows(
    cells: pd.DataFrame, limits: list[int], column_px: float = COLUMN_PX, lines_under: list[str] | None = None
) -> int:
    """How many rows to show before the rest is folded away: those that fit ``SCREEN_PX`` at an estimated line
    count per row (each column as wide as its words need plus a share of the room left, and the full-width
    ``lines_under`` each row); all of a short table."""
    if len(cells) <= MIN_ROWS:
        return len(cells)
    room = column_px / char_px(cells) - CELL_PAD_CHARS * len(cells.columns)
    under = [math.ceil(len(t) / (column_px / CHAR_PX - CELL_PAD_CHARS)) for t in lines_under or [""] * len(cells)]
    lengths = [max([len(str(c))] + [len(str(v)) for v in cells[c]]) for c in cells.columns]
    extra = [max(0, n - m) for n, m in zip(lengths, limits, strict=True)]
    spare = max(0.0, room - sum(limits))
    widths = [m + spare * e / (sum(extra) or 1) for m, e in zip(limits, extra, strict=True)]
    height = LINE_PX * 2  # the header
    for shown, row in enumerate(cells.itertuples(index=False)):
        lines = max(math.ceil(len(str(v)) / max(w, 1.0)) for v, w in zip(row, widths, strict=True))
        height += (lines + under[shown]) * LINE_PX + ROW_PAD_PX * (2 if lines_under else 1)
        if height > SCREEN_PX:
            return max(1, shown)
    return len(cells)
