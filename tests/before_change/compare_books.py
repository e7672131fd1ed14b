"""Two builds of the book compared page by page and export by export (#78: "every page's text and export rebuilt
identical to before the move, except the lines the closing note lists").

    python tests/before_change/compare_books.py BEFORE/_build/html AFTER/_build/html

Build each tree on its own code: ``cd TREE && PYTHONPATH=TREE/src verifylab book --root TREE`` (the venv's editable
install imports the checkout's ``src`` otherwise, kernels included, and both builds run the same code).

A page is compared as the reader sees it: its text, one line per block, with the edition's id and build time
normalised. An export (CSV, JSON) is compared as bytes, and where they differ cell by cell: a number that differs
only past its 12th significant digit is reported as such, apart from the cells that really differ. Prints every
difference and ends with a count; the exit status is 1 when anything differs beyond the last digits."""

from __future__ import annotations

import csv
import difflib
import io
import math
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

BLOCKS = {"p", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "div", "pre", "caption", "figcaption", "dt", "dd", "br"}
SKIPPED = {"script", "style", "head", "nav"}
NORMALISED = (
    (re.compile(r"\b\d+\.\d+\.\d+\+[0-9a-f]{8}(?:\.[a-z]+)?\b"), "<edition>"),
    (re.compile(r"\b20\d\d-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d)?(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d| UTC)?"), "<time>"),
)


class _Text(HTMLParser):
    """A page's text, one line per block element, scripts, styles and the side navigation left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._line: list[str] = []
        self._skip = 0

    def _end_line(self) -> None:
        text = " ".join("".join(self._line).split())
        if text:
            self.lines.append(text)
        self._line = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in SKIPPED:
            self._skip += 1
        elif tag in BLOCKS:
            self._end_line()

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIPPED:
            self._skip = max(self._skip - 1, 0)
        elif tag in BLOCKS:
            self._end_line()

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._line.append(data)


def page_text(path: Path) -> list[str]:
    """``path``'s text as the reader sees it, one line per block, edition ids and build times normalised."""
    parser = _Text()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    parser._end_line()
    lines = parser.lines
    for pattern, word in NORMALISED:
        lines = [pattern.sub(word, line) for line in lines]
    return lines


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _close(a: str, b: str) -> bool:
    x, y = _number(a), _number(b)
    return x is not None and y is not None and math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-300)


def export_difference(before: bytes, after: bytes, name: str) -> tuple[list[str], int]:
    """The cells that differ between two exports (CSV read as a table, anything else as text lines), and how many
    cells differ only past their 12th significant digit."""
    if before == after:
        return [], 0
    a_text, b_text = before.decode("utf-8", "replace"), after.decode("utf-8", "replace")
    for pattern, word in NORMALISED:
        a_text, b_text = pattern.sub(word, a_text), pattern.sub(word, b_text)
    if a_text == b_text:
        return [], 0
    if not name.endswith(".csv"):
        return list(difflib.unified_diff(a_text.splitlines(), b_text.splitlines(), lineterm="", n=0))[2:], 0
    rows_a, rows_b = list(csv.reader(io.StringIO(a_text))), list(csv.reader(io.StringIO(b_text)))
    if len(rows_a) != len(rows_b) or (rows_a and rows_a[0] != rows_b[0]):
        return [f"rows {len(rows_a)} -> {len(rows_b)}; header {rows_a[:1]} -> {rows_b[:1]}"], 0
    header, out, digits = rows_a[0] if rows_a else [], [], 0
    for i, (ra, rb) in enumerate(zip(rows_a[1:], rows_b[1:], strict=True), start=1):
        for j, (ca, cb) in enumerate(zip(ra, rb, strict=False)):
            if ca == cb:
                continue
            if _close(ca, cb):
                digits += 1
            else:
                column = header[j] if j < len(header) else str(j)
                out.append(f"row {i}, {column}: {ca!r} -> {cb!r}")
    return out, digits


def compare(before: Path, after: Path) -> int:
    """Print every difference between the two builds; the number of pages and exports that differ beyond the last
    digits."""
    differing = 0
    names = sorted(
        {p.relative_to(before) for p in before.rglob("*.html")} | {p.relative_to(after) for p in after.rglob("*.html")}
    )
    for name in names:
        if not (before / name).is_file() or not (after / name).is_file():
            print(f"page {name}: only in {'after' if (after / name).is_file() else 'before'}")
            differing += 1
            continue
        diff = list(difflib.unified_diff(page_text(before / name), page_text(after / name), lineterm="", n=0))[2:]
        if diff:
            differing += 1
            print(f"page {name}:")
            print("\n".join(f"    {line}" for line in diff if not line.startswith("@@")))
    exports = sorted(
        {p.relative_to(before) for p in before.rglob("*") if p.suffix in (".csv", ".json")}
        | {p.relative_to(after) for p in after.rglob("*") if p.suffix in (".csv", ".json")}
    )
    for name in exports:
        if not (before / name).is_file() or not (after / name).is_file():
            print(f"export {name}: only in {'after' if (after / name).is_file() else 'before'}")
            differing += 1
            continue
        cells, digits = export_difference((before / name).read_bytes(), (after / name).read_bytes(), str(name))
        if digits:
            print(f"export {name}: {digits} number(s) differ past their 12th significant digit")
        if cells:
            differing += 1
            print(f"export {name}:")
            print("\n".join(f"    {line}" for line in cells[:40]))
    print(f"{len(names)} pages and {len(exports)} exports compared; {differing} differ beyond the last digits")
    return differing


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    before, after = (Path(a) for a in sys.argv[1:])
    for folder in (before, after):
        if not (folder / "index.html").is_file():
            sys.exit(f"{folder}: no built book here (no index.html)")
    sys.exit(1 if compare(before, after) else 0)


if __name__ == "__main__":
    main()
