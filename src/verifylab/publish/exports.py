"""Design-review exports, written from the very objects the pages show: every numbered table of every chapter
as CSV (its cells as the page shows them, an ``edition`` column first) and every numbered chart as SVG and PNG
(captioned with the edition id), read from the executed chapters. An export therefore cannot disagree with its
page, and every export appears in the book."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from verifylab.errors import BookBuildError
from verifylab.iorw import atomic_write_json, atomic_write_text
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
    for notebook in sorted(generated.glob("[0-9][0-9]_*.ipynb")):
        doc = json.loads(notebook.read_text(encoding="utf-8"))
        for cell in doc.get("cells", []):
            figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
            if not figure:
                continue
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                for mime, kind in ((TABLE_MIME, "table"), (FIGURE_MIME, "figure"), (SECTION_MIME, "section")):
                    if mime in data:
                        yield Exhibit(notebook.stem, figure["name"], figure["caption"], kind, data[mime])


def table_frame(cells: dict, edition: str) -> pd.DataFrame:
    """A table's cells (``{"columns", "rows"}`` as the page holds them), with the edition id as the first column."""
    frame = pd.DataFrame(cells["rows"], columns=cells["columns"])
    frame.insert(0, "edition", edition)
    return frame


def write_exports(generated: Path, folder: Path, edition: str) -> list[dict]:
    """Write every exhibit and an ``exports.json`` index (chapter, name, caption, edition, files)."""
    folder.mkdir(parents=True, exist_ok=True)
    index = []
    for exhibit in exhibits(generated):
        if exhibit.kind != "figure":  # a table, or a section's tables: one CSV each, numbered in page order
            csvs = (
                {f"{exhibit.name}.csv": exhibit.data}
                if exhibit.kind == "table"
                else {f"{exhibit.name}-{n}.csv": t for n, t in enumerate(exhibit.data["tables"], start=1)}
            )
            for file, cells in csvs.items():
                atomic_write_text(folder / file, table_frame(cells, edition).to_csv(index=False))
            files = list(csvs)
        else:
            save_spec(exhibit.data["spec"], exhibit.name, f"{exhibit.caption} — edition {edition}", folder)
            files = [f"{exhibit.name}.svg", f"{exhibit.name}.png"]
        index.append(
            {
                "chapter": exhibit.chapter,
                "name": exhibit.name,
                "caption": exhibit.caption,
                "kind": exhibit.kind,
                "edition": edition,
                "files": files,
            }
        )
    if not index:
        raise BookBuildError(f"no numbered table or figure in the executed chapters under {generated}")
    atomic_write_json(folder / "exports.json", index)
    return index
