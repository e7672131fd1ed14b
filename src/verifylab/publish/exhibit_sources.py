"""Sphinx extension: every numbered exhibit of a chapter ends its caption with its sources and how to regenerate it.

The measured runs an exhibit shows (run ids found in it) link to their row of the per-run hardware and software
table; the command is the one that rebuilds the page from the stored runs (``verifylab book``) with the chapter's
notebook named, and, for a live re-measurement, ``verifylab run`` with the chapter in live mode.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from docutils import nodes

from verifylab.publish.paths import EDITION_FILE, GENERATED
from verifylab.publish.sphinx_offline import RUNS_TABLE

CHAPTER = re.compile(re.escape(GENERATED.as_posix()) + r"/(\d\d_[a-z_]+)$")
MANY_RUNS = 4  # more runs than this are counted, not listed


def _runs(app: Any) -> list[str]:
    edition = Path(app.confdir) / EDITION_FILE
    return json.loads(edition.read_text()).get("runs", []) if edition.is_file() else []


def add_exhibit_sources(app: Any, doctree: nodes.document, docname: str) -> None:
    """``doctree-resolved``: append "Runs: ... Regenerate: ..." to each numbered exhibit's caption."""
    chapter = CHAPTER.match(docname)
    if not chapter:
        return
    runs = _runs(app)
    table_uri = app.builder.get_relative_uri(docname, RUNS_TABLE[0]) + "#" + RUNS_TABLE[1]
    for figure in doctree.findall(nodes.figure):
        caption = next(iter(figure.findall(nodes.caption)), None)
        if caption is None or not figure.get("ids") or RUNS_TABLE[1] in figure["ids"]:
            continue
        text = figure.astext() + " ".join(n.astext() for n in figure.findall(nodes.raw))
        shown = [r for r in runs if r in text]
        note = nodes.inline(classes=["verifylab-sources"])
        note += nodes.Text(" Sources: ")
        if not shown:
            note += nodes.Text("no measured run (reported, public or modelled figures, named in the exhibit). ")
        elif len(shown) > MANY_RUNS:
            note += nodes.Text(f"{len(shown)} measured runs, named in the exhibit (")
            note += nodes.reference("", "their hardware", internal=True, refuri=table_uri)
            note += nodes.Text("). ")
        else:
            note += nodes.Text("measured runs ")
            for i, run in enumerate(shown):
                note += nodes.Text(", " if i else "")
                note += nodes.reference("", run, internal=True, refuri=table_uri)
            note += nodes.Text(" (hardware in the linked table). ")
        note += nodes.Text("Regenerate: ")
        note += nodes.literal("", "verifylab book")
        note += nodes.Text(f" (replay; notebooks/{chapter.group(1)}.py), or ")
        note += nodes.literal("", "verifylab run --params PARAMS")
        note += nodes.Text(" with the chapter in live mode to measure again.")
        caption += note


def setup(app: Any) -> dict[str, Any]:
    app.connect("doctree-resolved", add_exhibit_sources)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
