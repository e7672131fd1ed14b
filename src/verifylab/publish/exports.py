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


def table_frame(exhibit: Exhibit, edition: str) -> pd.DataFrame:
    """A numbered table's cells, with the edition id as the first column."""
    frame = pd.DataFrame(exhibit.data["rows"], columns=exhibit.data["columns"])
    frame.insert(0, "edition", edition)
    return frame


def write_exports(generated: Path, folder: Path, edition: str) -> list[dict]:
    """Write every exhibit and an ``exports.json`` index (chapter, name, caption, edition, files)."""
    folder.mkdir(parents=True, exist_ok=True)
    index = []
    for exhibit in exhibits(generated):
        if exhibit.kind == "table":
            atomic_write_text(folder / f"{exhibit.name}.csv", table_frame(exhibit, edition).to_csv(index=False))
            files = [f"{exhibit.name}.csv"]
        elif exhibit.kind == "section":  # one CSV per table of the section, numbered in page order
            files = []
            for number, part in enumerate(exhibit.data["tables"], start=1):
                frame = table_frame(Exhibit(exhibit.chapter, exhibit.name, part["caption"], "table", part), edition)
                atomic_write_text(folder / f"{exhibit.name}-{number}.csv", frame.to_csv(index=False))
                files.append(f"{exhibit.name}-{number}.csv")
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
