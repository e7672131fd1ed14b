"""Design-review exports, written from the very objects the pages show: every numbered table of every chapter
as CSV (its cells as the page shows them, an ``edition`` column first), the same cells as data (one row per
cell: number, interval bounds, unit), and every numbered chart as SVG and PNG (captioned with the edition id),
read from the executed chapters. Each file is named and captioned with its exhibit's number in the book
("fig-4-1-..."). An export therefore cannot disagree with its page, and every export appears in the book."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from verifylab.csv_cells import csv_text
from verifylab.errors import BookBuildError
from verifylab.iorw import atomic_write_json, atomic_write_text
from verifylab.publish.pages import chapter_of_page, executed_pages
from verifylab.publish.paths import export_stem
from verifylab.report.charts import FIGURE_MIME, save_spec
from verifylab.report.section import SECTION_MIME
from verifylab.report.tables import TABLE_MIME


@dataclass(frozen=True)
class Exhibit:
    """One numbered table or figure of a chapter, as its executed cell holds it."""

    chapter: str
    name: str  # the anchor: tbl-... or fig-...
    caption: str
    kind: str  # "table" or "figure"
    data: dict


def exhibits(generated: Path) -> Iterator[Exhibit]:
    """Every numbered exhibit of the executed chapters in ``generated``, in page order."""
    for notebook in executed_pages(generated):
        doc = json.loads(notebook.read_text(encoding="utf-8"))
        for cell in doc.get("cells", []):
            figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
            if not figure:
                continue
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                for mime, kind in ((TABLE_MIME, "table"), (FIGURE_MIME, "figure"), (SECTION_MIME, "section")):
                    if mime in data:
                        yield Exhibit(
                            chapter_of_page(notebook.stem), figure["name"], figure["caption"], kind, data[mime]
                        )


def table_frame(cells: dict, edition: str) -> pd.DataFrame:
    """A table's cells (``{"columns", "rows"}`` as the page holds them), with the edition id as the first column."""
    frame = pd.DataFrame(cells["rows"], columns=cells["columns"])
    frame.insert(0, "edition", edition)
    return frame


_NUMBER = re.compile(r"^[~<>≈]?(-?[\d,]*\.?\d+)(?:\s?[-–]\s?(-?[\d,]*\.?\d+))?\s?%?$")
_UNIT = re.compile(r"\(([^()]+)\)$")


def cell_number(shown: str) -> tuple[float | None, float | None, float | None]:
    """A printed cell as numbers: (value, low, high); a range ``0.45-1.02`` gives its bounds and no value."""
    match = _NUMBER.match(shown.strip())
    if not match:
        return None, None, None
    first = float(match.group(1).replace(",", ""))
    if match.group(2) is None:
        return first, None, None
    second = float(match.group(2).replace(",", ""))
    return (None, first, second) if first <= second else (None, None, None)  # "20261201-091704" is no range


def table_data(cells: dict, edition: str, number: str) -> pd.DataFrame:
    """A table's cells as data: one row per cell with the column's quantity and unit, the number (or a range's
    bounds) and the text the page shows."""
    rows = []
    for r, row in enumerate(cells["rows"], start=1):
        for column, shown in zip(cells["columns"], row, strict=True):
            unit = _UNIT.search(column)
            value, low, high = cell_number(str(shown))
            rows.append(
                {
                    "edition": edition,
                    "exhibit": number,
                    "row": r,
                    "row_label": row[0],
                    "quantity": _UNIT.sub("", column).strip(),
                    "unit": unit.group(1) if unit else "",
                    "value": value,
                    "low": low,
                    "high": high,
                    "shown": shown,
                }
            )
    return pd.DataFrame(rows)


def exhibit_numbers(html_dir: Path | None) -> dict[str, str]:
    """Each exhibit anchor's number as the rendered book prints it (``tbl-decision-regimes`` -> ``Fig. 4.1``)."""
    found: dict[str, str] = {}
    for page in sorted(html_dir.rglob("*.html")) if html_dir and html_dir.is_dir() else []:
        text = page.read_text(encoding="utf-8")
        pattern = r'<figure[^>]*\bid="([^"]+)"[^>]*>.*?<span class="caption-number">([^<]+?)\s*</span>'
        for anchor, label in re.findall(pattern, text, flags=re.S):
            found.setdefault(anchor, label.strip())
    return found


def _numbered(stem: str, n: int) -> str:
    """The n-th CSV of an exhibit: ``stem.csv`` for the first (the one its caption links), ``stem-2.csv`` on."""
    return f"{stem}.csv" if n == 1 else f"{stem}-{n}.csv"


def chart_data(spec: dict) -> list[list[dict]]:
    """The rows a chart draws, one list per dataset of its Vega-Lite spec (inline values and named datasets, the
    layers' own included), in spec order."""
    found: list[list[dict]] = []

    def visit(part: dict) -> None:
        values = part.get("data", {}).get("values") if isinstance(part.get("data"), dict) else None
        if isinstance(values, list):
            found.append(values)
        for key in ("layer", "hconcat", "vconcat", "concat"):
            for child in part.get(key, []):
                visit(child)
        if isinstance(part.get("spec"), dict):
            visit(part["spec"])

    found.extend(rows for rows in spec.get("datasets", {}).values() if isinstance(rows, list))
    visit(spec)
    return [rows for rows in found if rows]


def write_exports(generated: Path, folder: Path, edition: str, html_dir: Path | None = None) -> list[dict]:
    """Write every exhibit and an ``exports.json`` index (chapter, name, number, caption, edition, files)."""
    folder.mkdir(parents=True, exist_ok=True)
    numbers = exhibit_numbers(html_dir)
    index = []
    for exhibit in exhibits(generated):
        number = numbers.get(exhibit.name, "")
        stem = export_stem(number, exhibit.name)
        caption = f"{number}: {exhibit.caption}" if number else exhibit.caption
        if exhibit.kind != "figure":  # a table, or a section's tables: one CSV each, numbered in page order
            tables = [exhibit.data] if exhibit.kind == "table" else exhibit.data["tables"]
            csvs = {_numbered(stem, n): t for n, t in enumerate(tables, start=1)}
            for file, cells in csvs.items():
                atomic_write_text(folder / file, csv_text(table_frame(cells, edition)))
                data = table_data(cells, edition, number)
                atomic_write_text(folder / file.replace(".csv", ".data.csv"), csv_text(data))
            files = [f for file in csvs for f in (file, file.replace(".csv", ".data.csv"))]
        else:
            save_spec(exhibit.data["spec"], stem, f"{caption} — edition {edition}", folder)
            charted = {_numbered(stem, n): rows for n, rows in enumerate(chart_data(exhibit.data["spec"]), start=1)}
            for file, rows in charted.items():
                frame = pd.DataFrame(rows)
                frame.insert(0, "edition", edition)
                atomic_write_text(folder / file, csv_text(frame))
            files = [f"{stem}.svg", f"{stem}.png", *charted]
        index.append(
            {
                "chapter": exhibit.chapter,
                "name": exhibit.name,
                "number": number,
                "caption": caption,
                "kind": exhibit.kind,
                "edition": edition,
                "files": files,
            }
        )
    if not index:
        raise BookBuildError(f"no numbered table or figure in the executed chapters under {generated}")
    atomic_write_json(folder / "exports.json", index)
    return index
