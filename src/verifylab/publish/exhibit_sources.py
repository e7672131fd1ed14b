"""Sphinx extension: every numbered exhibit of a chapter ends its caption with its sources and how to reproduce it.

Each measured run an exhibit shows (a run id found in it) links to its run page (``publish.run_pages``); the
"Reproduce" line gives the command that rebuilds the exhibit alone from the stored runs (``verifylab exhibit
NAME``), the chapter's (``verifylab book``), the live re-measurement, with the edition, and links the exhibit's data
as CSV in the edition's exports (``exports/<fig-n-m>-<name>.csv``: a table's cells, a chart's data).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from docutils import nodes

from verifylab.publish.pages import PAGE_STEM
from verifylab.publish.paths import EDITION_FILE, EXPORTS, GENERATED, export_stem

CHAPTER = re.compile(re.escape(GENERATED.as_posix()) + "/" + PAGE_STEM.pattern + "$")  # a chapter's page
TAG = re.compile(r"<[^>]*>")


def _edition(app: Any) -> dict:
    edition = Path(app.confdir) / EDITION_FILE
    return json.loads(edition.read_text()) if edition.is_file() else {}


def runs_named(text: str, runs: list[str]) -> list[str]:
    """The runs ``text`` names: an id counts where it appears outside every longer id that ``text`` names there
    (``20261130-live`` inside ``20261130-live-tp2`` is not a citation of the shorter run)."""
    covered: list[tuple[int, int]] = []
    named = set()
    for run in sorted(runs, key=len, reverse=True):
        spans = [(m.start(), m.end()) for m in re.finditer(re.escape(run), text)]
        free = [(a, b) for a, b in spans if not any(c <= a and b <= d for c, d in covered)]
        if free:
            named.add(run)
        covered += spans
    return [r for r in runs if r in named]


def add_exhibit_sources(app: Any, doctree: nodes.document, docname: str) -> None:
    """``doctree-resolved``: append "Sources: ... Reproduce: ... Data: ..." to each numbered exhibit's caption."""
    chapter = CHAPTER.match(docname)
    if not chapter:
        return
    edition = _edition(app)
    runs = edition.get("runs", [])
    numbers = app.env.toc_fignumbers.get(docname, {}).get("figure", {})
    to_root = app.builder.get_relative_uri(docname, "index").rsplit("index", 1)[0]
    for figure in doctree.findall(nodes.figure):
        caption = next(iter(figure.findall(nodes.caption)), None)
        if caption is None or not figure.get("ids"):
            continue
        raw = " ".join(TAG.sub("", n.astext()) for n in figure.findall(nodes.raw))  # a run id wraps at <wbr>
        text = figure.astext() + " " + raw
        shown = runs_named(text, runs)
        note = nodes.inline(classes=["verifylab-sources"])
        note += nodes.Text(" Sources: ")
        if not shown:
            note += nodes.Text("no measured run (reported, public or modelled figures, named in the exhibit). ")
        else:
            note += nodes.Text("measured runs " if len(shown) > 1 else "measured run ")
            for i, run in enumerate(shown):
                note += nodes.Text(", " if i else "")
                uri = app.builder.get_relative_uri(docname, f"{GENERATED.as_posix()}/runs/{run}")
                note += nodes.reference("", run, internal=True, refuri=uri)
            note += nodes.Text(" (each page: hardware, software, parameters). ")
        anchor = figure["ids"][0]
        note += nodes.Text("Reproduce: ")
        note += nodes.literal("", f"verifylab exhibit {anchor}")
        note += nodes.Text(" rebuilds this exhibit alone from data/")
        note += nodes.Text(f" (edition {edition['id']}); " if edition.get("id") else "; ")
        note += nodes.literal("", "verifylab book")
        note += nodes.Text(f" the whole chapter (notebooks/{chapter.group(1)}.py); ")
        note += nodes.literal("", "verifylab run --params PARAMS")
        note += nodes.Text(" with the chapter in live mode measures it again.")
        if anchor in numbers:
            note += nodes.Text(" Data: ")
            file = export_stem("Fig. " + ".".join(map(str, numbers[anchor])), anchor) + ".csv"
            note += nodes.reference("", file, internal=False, refuri=f"{to_root}{EXPORTS}/{file}")
            note += nodes.Text(".")
        caption += note


def setup(app: Any) -> dict[str, Any]:
    app.connect("doctree-resolved", add_exhibit_sources)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
