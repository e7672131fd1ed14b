"""Issue 53 class 1: text escaped twice (``md_text``, then the finding's ``inert_markdown``) must stay text. At
dc55d9b the second pass escaped the backslash the first had put before ``<``, and a stored probe's label
``<img src=x onerror=...>`` became an element in chapter 1. The boundary: ``report.section.inert_markdown`` escapes
each ``<`` exactly once, leaving one already escaped as it is."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from markdown_it import MarkdownIt

from verifylab.analysis.comm_probe import probe_finding
from verifylab.report.section import Prose, inert_markdown, makes_html, md_text

INJECTED = re.compile(r"<(img|script|svg|a)\b", re.IGNORECASE)
LABELS = [
    "<img src=x onerror=alert(1)>",
    "\\<img src=x onerror=alert(2)>",  # already escaped once by its author
    "\\\\<svg onload=alert(3)>",  # an even run of backslashes before <
    "box `<script>alert(4)</script>`",
]


@pytest.mark.parametrize("label", LABELS)
def test_a_probe_label_escaped_twice_stays_text_in_chapter_one(label):
    overview = pd.DataFrame(
        [
            {
                "group": "all",
                "regime": "healthy P2P",
                "nccl transport": "P2P",
                "all-reduce, graph (µs)": 24.0,
                "at tokens": 4,
                "ranks": 2,
                "hardware": f"{label} — 2 x GPU",
            }
        ]
    )
    markdown = probe_finding(overview)._repr_markdown_()
    assert not makes_html(markdown)
    assert not INJECTED.search(MarkdownIt("commonmark").render(markdown))


@pytest.mark.parametrize("label", LABELS)
def test_escaping_is_idempotent_and_keeps_the_text(label):
    once = inert_markdown(Prose(f"on {md_text(label)}"))
    assert inert_markdown(once) == once
    rendered = MarkdownIt("commonmark").render(once)
    assert not INJECTED.search(rendered) and "&lt;" in rendered
