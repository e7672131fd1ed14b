"""One quantity, one printed value (#29): the same row (same non-numeric cells: variant, run, option, regime) under
the same quantity (header, its method prefix aside) prints the same text in every table of the edition, and a
printed median never falls outside its own printed interval."""

from __future__ import annotations

import re
from itertools import combinations

import pytest

from .test_book_reads import CHAPTERS, Tables

NUMBER = re.compile(r"[~<>=+−-]?[\d.,]+(?:[-–][\d.,]+)?[%x]?")


def quantity(header: str) -> str:
    """A header without the median's interval method: ``median's ... coverage: high (tok/s)`` and ``interval high
    (tok/s)`` are both ``high (tok/s)``; another interval (a sweep's bootstrap of the mean) keeps its name."""
    if header.startswith("median's"):
        header = header.rsplit(": ", 1)[-1]
    return re.sub(r"^interval ", "", header).strip()


def rows_of(tables: dict[str, list[list[list[str]]]]) -> list[tuple[str, frozenset[str], dict[str, str]]]:
    """Every table row as (exhibit, its non-numeric cells, {quantity: printed number})."""
    out = []
    for exhibit, found in tables.items():
        for table in found:
            if len(table) < 2:
                continue
            head = table[0]
            for row in table[1:]:
                if len(row) != len(head):
                    continue
                words = frozenset(c for c in row if c and c != "—" and not NUMBER.fullmatch(c))
                numbers = {quantity(h): c for h, c in zip(head, row, strict=True) if NUMBER.fullmatch(c) and "(" in h}
                out.append((exhibit, words, numbers))
    return out


@pytest.fixture(scope="module")
def printed_rows(built_book):
    tables: dict[str, list] = {}
    for name in CHAPTERS:
        parser = Tables()
        parser.feed((built_book / "book" / "_generated" / f"{name}.html").read_text(encoding="utf-8"))
        tables.update(parser.figures)
    return rows_of(tables)


def test_a_quantity_of_one_row_prints_one_value_in_every_table(printed_rows):
    clashes = []
    for (ea, wa, na), (eb, wb, nb) in combinations(printed_rows, 2):
        if ea == eb or len(wa & wb) < 2 or not (wa <= wb or wb <= wa):
            continue
        for q in set(na) & set(nb):
            if na[q] != nb[q]:
                clashes.append(f"{sorted(wa & wb)[:3]} {q}: {ea} {na[q]} vs {eb} {nb[q]}")
    assert len(printed_rows) > 200, "the scan reads too few rows"
    assert clashes == []


def test_a_printed_median_lies_inside_its_printed_interval(printed_rows):
    def value(text: str) -> float:
        return float(text.replace(",", ""))

    checked = 0
    for exhibit, _, numbers in printed_rows:
        median = next((v for q, v in numbers.items() if q.startswith("median output")), None)
        if median and "low (tok/s)" in numbers and "high (tok/s)" in numbers:
            checked += 1
            assert value(numbers["low (tok/s)"]) <= value(median) <= value(numbers["high (tok/s)"]), exhibit
    assert checked >= 4


def test_the_scan_catches_one_quantity_printed_two_ways():
    tables = {
        "tbl-a": [[["variant", "run id", "high (tok/s)"], ["eagle3", "20261130-130757", "241"]]],
        "tbl-b": [[["variant", "run id", "interval high (tok/s)"], ["eagle3", "20261130-130757", "242"]]],
    }
    rows = rows_of(tables)
    (a, b) = rows
    assert a[2]["high (tok/s)"] != b[2]["high (tok/s)"] and a[1] == b[1]
