"""A titled group of tables and notes that renders as one HTML block (for mode-dependent chapter parts)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import pandas as pd

from verifylab.report.tables import Table, cells_data, cells_html

SECTION_MIME = "application/vnd.verifylab.section+json"


@dataclass
class Section:
    """Tables and notes shown together; ``_repr_html_`` is what the notebook displays."""

    title: str
    parts: list[tuple[str, pd.DataFrame | str]] = field(default_factory=list)

    def add(self, caption: str, content: pd.DataFrame | str) -> Section:
        self.parts.append((caption, content))
        return self

    def _rendered(self) -> list[tuple[str, pd.DataFrame | str]]:
        """Each part with its table as the cells the book shows (computed once for the page and the export)."""
        return [(c, Table(p).cells() if isinstance(p, pd.DataFrame) else p) for c, p in self.parts]

    def _html(self, rendered: list[tuple[str, pd.DataFrame | str]]) -> str:
        out = [f"<div class='verifylab-section'><p><strong>{html.escape(self.title)}</strong></p>"]
        for caption, content in rendered:
            out.append(f"<p>{html.escape(caption)}</p>")
            is_table = isinstance(content, pd.DataFrame)
            out.append(cells_html(content) if is_table else f"<pre>{html.escape(content)}</pre>")
        return "".join(out) + "</div>"

    def _repr_html_(self) -> str:
        return self._html(self._rendered())

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The page's HTML, plus each table's cells for the exports (a MIME type the page ignores)."""
        rendered = self._rendered()
        tables = [{"caption": c} | cells_data(p) for c, p in rendered if isinstance(p, pd.DataFrame)]
        return {"text/html": self._html(rendered), SECTION_MIME: {"title": self.title, "tables": tables}}

    def __repr__(self) -> str:
        return "\n".join([self.title] + [f"{c}\n{p}" for c, p in self.parts])


class Prose(str):
    """Text a chapter shows as Markdown (a finding sentence formatted from values); still a plain ``str``."""

    def _repr_markdown_(self) -> str:
        return str(self)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~$])")


def md_text(text: str) -> str:
    """Free text (a hardware label, a server message) made inert in Markdown: every special character escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))
