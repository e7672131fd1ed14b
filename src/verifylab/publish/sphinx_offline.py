"""Sphinx extension for the book: keep every page free of network scripts; stamp the edition on every page.

Jupyter Book 1 always loads sphinx-thebe, which injects an inline script pointing at a CDN (and, with
Sphinx 7, twice per page, which is a console error). Thebe is off here, so its scripts are removed.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from verifylab.publish.paths import EDITION_FILE

DROPPED_MARKERS = ("thebe",)
RUNS_TABLE = "tbl-run-hardware"  # the per-run hardware table: the banner links it on whichever page holds it


def _is_dropped(script: Any) -> bool:
    filename = str(getattr(script, "filename", script) or "")
    body = str(getattr(script, "attributes", {}).get("body", ""))
    return any(m in filename.lower() or m in body.lower() for m in DROPPED_MARKERS)


def drop_network_scripts(app, pagename, templatename, context, doctree) -> None:
    """``html-page-context`` hook: remove thebe's scripts from the page."""
    scripts = context.get("script_files")
    if scripts:
        context["script_files"] = [s for s in scripts if not _is_dropped(s)]


def edition_banner(app, pagename, templatename, context, doctree) -> None:
    """Put the edition id, build date and the number of measured runs (linked to their hardware table) on every page."""
    edition_file = Path(app.confdir) / EDITION_FILE
    if "body" not in context or not edition_file.is_file():
        return
    edition = json.loads(edition_file.read_text())
    count = len(edition.get("runs", []))
    runs = f"{count} measured run{'s' if count != 1 else ''}"
    held_by = app.env.get_domain("std").labels.get(RUNS_TABLE)  # (page, anchor, title) where the label is
    if count and held_by:
        uri = app.builder.get_relative_uri(pagename, held_by[0]) + "#" + held_by[1]
        runs = f'<a href="{html.escape(uri)}">{runs}: their hardware and software</a>'
    banner = (
        f'<div class="verifylab-edition" style="font-size:0.8em;color:#555;border-bottom:1px solid #ddd;'
        f'margin-bottom:1em;padding-bottom:0.3em">Edition <code>{html.escape(edition["id"])}</code> · built '
        f"{html.escape(edition['built'])} · {runs}</div>"
    )
    context["body"] = banner + context["body"]


def setup(app) -> dict[str, Any]:
    app.connect("html-page-context", drop_network_scripts, priority=900)
    app.connect("html-page-context", edition_banner, priority=901)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
