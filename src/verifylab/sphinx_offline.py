"""Sphinx extension for the book: keep every page free of network scripts.

Jupyter Book 1 always loads sphinx-thebe, which injects an inline script pointing at a CDN (and, with
Sphinx 7, twice per page, which is a console error). Thebe is off here, so its scripts are removed.
"""

from __future__ import annotations

from typing import Any

DROPPED_MARKERS = ("thebe",)


def _is_dropped(script: Any) -> bool:
    filename = str(getattr(script, "filename", script) or "")
    body = str(getattr(script, "attributes", {}).get("body", ""))
    return any(m in filename.lower() or m in body.lower() for m in DROPPED_MARKERS)


def drop_network_scripts(app, pagename, templatename, context, doctree) -> None:
    """``html-page-context`` hook: remove thebe's scripts from the page."""
    scripts = context.get("script_files")
    if scripts:
        context["script_files"] = [s for s in scripts if not _is_dropped(s)]


def setup(app) -> dict[str, Any]:
    app.connect("html-page-context", drop_network_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
