"""A titled group of tables and notes that renders as one HTML block (for mode-dependent chapter parts)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import pandas as pd

from verifylab.report.tables import Table

SECTION_MIME = "application/vnd.verifylab.section+json"


@dataclass
class Section:
    """Tables and notes shown together; ``_repr_html_`` is what the notebook displays."""

    title: str
    parts: list[tuple[str, pd.DataFrame | str]] = field(default_factory=list)

    def add(self, caption: str, content: pd.DataFrame | str) -> Section:
        self.parts.append((caption, content))
        return self

    def _repr_html_(self) -> str:
        out = [f"<div class='verifylab-section'><p><strong>{html.escape(self.title)}</strong></p>"]
        for caption, content in self.parts:
            out.append(f"<p>{html.escape(caption)}</p>")
            out.append(
                Table(content)._repr_html_()
                if isinstance(content, pd.DataFrame)
                else f"<pre>{html.escape(content)}</pre>"
            )
        return "".join(out) + "</div>"

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The page's HTML, plus each table's cells for the exports (a MIME type the page ignores)."""
        parts = []
        for caption, content in self.parts:
            if isinstance(content, pd.DataFrame):
                cells = Table(content).cells()
                parts.append({"caption": caption, "columns": list(cells.columns), "rows": cells.to_numpy().tolist()})
        return {"text/html": self._repr_html_(), SECTION_MIME: {"title": self.title, "tables": parts}}

    def __repr__(self) -> str:
        return "\n".join([self.title] + [f"{c}\n{p}" for c, p in self.parts])


class Prose(str):
    """Text a chapter shows as Markdown (a finding sentence formatted from values); still a plain ``str``."""

    def _repr_markdown_(self) -> str:
        return str(self)
