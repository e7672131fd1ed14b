"""A titled group of tables and notes that renders as one HTML block (for mode-dependent chapter parts)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import pandas as pd
from markdown_it import MarkdownIt

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
    """Text a chapter shows as Markdown (a finding sentence formatted from values); still a plain ``str``. What
    the page gets is :func:`inert_markdown` of it: a label or server message inside can never become HTML."""

    def _repr_markdown_(self) -> str:
        return inert_markdown(str(self))


# A code span as CommonMark reads it: a run of backticks, closed by a run of the same length.
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


def inert_markdown(markdown: str) -> str:
    """``markdown`` that can produce no HTML element, whatever free text (a label, a server error with
    backticks) was formatted into it: every ``<`` outside code spans escaped, so no raw HTML and no autolink
    survive (inside a code span the renderer escapes it). Checked with the CommonMark parser MyST uses; where
    backticks were crafted to fool the code-span split, every ``<`` is escaped."""
    out, at = [], 0
    for span in _CODE_SPAN.finditer(markdown):
        out.append(_escape_angles(markdown[at : span.start()]))
        out.append(span.group(0))
        at = span.end()
    out.append(_escape_angles(markdown[at:]))
    inert = "".join(out)
    return _escape_angles(markdown) if makes_html(inert) else inert


_UNESCAPED_ANGLE = re.compile(r"(\\*)<")


def _escape_angles(markdown: str) -> str:
    """Every ``<`` that CommonMark would read as markup escaped once: one already escaped (an odd run of
    backslashes before it, as :func:`md_text` leaves it) is left alone, so text escaped twice stays inert (an even
    run would escape the backslash and free the ``<``)."""
    return _UNESCAPED_ANGLE.sub(lambda m: m.group(1) + ("<" if len(m.group(1)) % 2 else "\\<"), markdown)


def makes_html(markdown: str) -> bool:
    """Whether CommonMark renders ``markdown`` with raw HTML or an autolink in it."""
    for token in _COMMONMARK.parse(markdown):
        if token.type == "html_block":
            return True
        for child in token.children or ():
            if child.type == "html_inline" or (child.type == "link_open" and child.markup == "autolink"):
                return True
    return False


_COMMONMARK = MarkdownIt("commonmark")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~$])")


def raw_html_block(fragment: str) -> str:
    """HTML (escaped where it holds free text) as a MyST raw block that no fence inside it can end: backticks
    become entities (``html.escape`` leaves them)."""
    return "```{raw} html\n" + fragment.replace("`", "&#96;") + "\n```\n"


def md_text(text: str) -> str:
    """Free text (a hardware label, a server message) made inert in Markdown: every special character escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))
