"""#82: a PDF keeps every row of a folded table. The page is printed as `make book` prints it; the last row of each
folded table on it (the part a reader opens with "Show the other N rows") is found in the PDF's text."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from pypdf import PdfReader

from verifylab.publish.pdf import chromium, print_pdfs

PAGE = "04_fusion_vs_elimination-public"  # the public figures: dozens of rows, most of them folded
pytestmark = pytest.mark.skipif(chromium() is None, reason="no Chromium to print with (make test installs it)")


def _folded_last_rows(page_html: str) -> list[str]:
    """For every folded table on the page, a cell of its last row: its id where the row has one (``pub-65``), else
    its first cell with text (a spanned line under a row, a source and its quote, is not that row)."""
    rows = []
    for folded in re.findall(r'<details class="verifylab-more">.*?</details>', page_html, re.S):
        last = [body for attrs, body in re.findall(r"<tr([^>]*)>(.*?)</tr>", folded, re.S) if "v-under" not in attrs]
        cells = [
            html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", last[-1], re.S)
        ]
        ids = [c for c in cells if re.fullmatch(r"[a-z]+-\d+", c)]
        rows.append(ids[0] if ids else next(c for c in cells if c))
    return rows


def test_the_last_row_of_a_folded_table_is_in_its_pages_pdf(built_book: Path, tmp_path):
    last_rows = _folded_last_rows((built_book / "book" / "_generated" / f"{PAGE}.html").read_text(encoding="utf-8"))
    assert last_rows, f"{PAGE} folds no table: choose a page that does"
    (pdf,), why = print_pdfs(built_book, tmp_path, [PAGE])
    text = re.sub(r"\s+", "", "".join(page.extract_text() or "" for page in PdfReader(pdf).pages))
    for row in last_rows:
        assert re.sub(r"\s+", "", row) in text, (row, why)
