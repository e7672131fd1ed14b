"""Issue 27 item 1: free text that reaches a page (a failed chapter's error, a hardware label, a finding's
label) is escaped by construction. Each page source is rendered with the MyST parser the book uses (and the
CommonMark one myst-nb uses for a cell's Markdown output); no element or script may come out of it. At
b488f1d the failure note put the error in a hand-built code span, which a backtick in the error closed."""

from __future__ import annotations

import re

import nbformat
import pandas as pd
import pytest
from docutils.core import publish_string
from markdown_it import MarkdownIt
from myst_parser.parsers.docutils_ import Parser

from verifylab.publish.build import ChapterResult
from verifylab.publish.edition import _changes_table
from verifylab.publish.pipeline import _failure_page
from verifylab.report.section import Prose, inert_markdown, makes_html

HOSTILE = [
    "boom `<img src=x onerror=alert(1)>`",  # the reported attack: a backtick closes the code span
    "<script>alert(1)</script>",
    "\\` <img src=x onerror=alert(2)> `",  # an escaped backtick: no code span opens there
    "``<img src=x onerror=alert(3)>`",  # unbalanced runs
    "<http://evil.example>",  # an autolink
    "a | b\n\n<div onclick=alert(4)>x</div>",  # a table pipe and an HTML block
]
INJECTED = re.compile(r"<(img|script|div|a)\b", re.IGNORECASE)


def myst_html(source: str) -> str:
    """The body a MyST page renders to (docutils, as Sphinx reads the book's pages)."""
    page = publish_string(
        source,
        parser=Parser(),
        writer_name="html5",
        settings_overrides={"output_encoding": "unicode", "report_level": 5},
    )
    return page.split("<body>", 1)[1].split("</body>", 1)[0]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_failed_chapters_error_is_text_on_its_page(tmp_path, text):
    result = ChapterResult("03_verify_breakdown", tmp_path / "03_verify_breakdown.ipynb", ok=False, error=text)
    _failure_page(result, tmp_path)
    notebook = nbformat.read(result.output, as_version=4)
    page = myst_html("\n\n".join(c.source for c in notebook.cells if c.cell_type == "markdown"))
    assert not INJECTED.search(page), page
    assert "This chapter failed in this run" in page


@pytest.mark.parametrize("text", HOSTILE)
def test_a_finding_with_a_hostile_label_renders_inert(text):
    markdown = Prose(f"Measured on {text} at 24 µs per all-reduce.")._repr_markdown_()
    assert not makes_html(markdown)
    assert not INJECTED.search(MarkdownIt("commonmark").render(markdown))  # myst-nb's path for cell Markdown
    assert not INJECTED.search(myst_html(markdown))


@pytest.mark.parametrize("text", HOSTILE)
def test_the_changes_table_escapes_its_cells(text):
    table = _changes_table(pd.DataFrame([{"finding": text, "previous": "1", "now": "2"}]))
    assert not INJECTED.search(myst_html("# Changes\n\n" + table))


@pytest.mark.parametrize("text", HOSTILE)
def test_a_run_page_escapes_what_its_manifest_says(text):
    from datetime import UTC, datetime

    from verifylab.publish.run_pages import run_page
    from verifylab.store.manifest import Manifest

    manifest = Manifest(
        run_id="20261202-000000-hostile",
        label=f"box {text}",
        purpose=text,
        created=datetime(2026, 12, 2, tzinfo=UTC),
        host=text,
        gpu_name=text,
        compute_capability="9.0",
        gpu_count=1,
        interconnect=text,
        driver=None,
        cuda=None,
        versions={"sglang": text},
        parameters={"flag": text},
        git_commit=None,
        environment={"NCCL_DEBUG": text},
        notes=[text, "```\n" + text],
    )
    page = myst_html(run_page(manifest))
    assert not INJECTED.search(page.replace('<a class="reference external"', ""))
    assert "Run 20261202-000000-hostile" in page


def test_inert_markdown_keeps_what_prose_means():
    text = "From **54.1** -> 96.1 tok/s: run `verifylab gates apply --root <site-packages>` ([chapter 1](x.md))."
    assert inert_markdown(text) == text  # no `<` outside the code span: unchanged
    html = MarkdownIt("commonmark").render(inert_markdown(text))
    assert "<strong>54.1</strong>" in html and "<code>verifylab gates apply --root &lt;site-packages&gt;</code>" in html


TRAPS = [  # each would set window.pwned if it ran
    'boom `<img src=x onerror="window.pwned=1">`',
    "<script>window.pwned=2</script>",
    '``<svg onload="window.pwned=3">`',
    '<iframe srcdoc="<script>parent.pwned=4</script>"></iframe>',
]


@pytest.mark.browser
def test_pages_built_from_hostile_text_run_nothing_in_a_browser(tmp_path, browser):
    """The failure page and a finding, rendered as the book renders them, opened in Chromium: no element comes
    out of the text and nothing in it runs."""
    bodies = []
    for n, text in enumerate(TRAPS):
        result = ChapterResult(f"0{n}_x", tmp_path / f"0{n}_x.ipynb", ok=False, error=text)
        _failure_page(result, tmp_path)
        notebook = nbformat.read(result.output, as_version=4)
        bodies.append(myst_html("\n\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")))
        bodies.append(myst_html(Prose(f"Measured on {text}.")._repr_markdown_()))
    page_file = tmp_path / "hostile.html"
    page_file.write_text("<!doctype html><html><body>" + "\n".join(bodies) + "</body></html>", encoding="utf-8")
    page = browser.new_page()
    page.goto(page_file.as_uri(), wait_until="load")
    page.wait_for_timeout(200)  # an onerror/onload handler runs right after load
    assert page.evaluate("() => window.pwned") is None
    assert page.evaluate("() => document.querySelectorAll('img, script, svg, iframe, a').length") == 0
    assert "window.pwned=1" in page.inner_text("body")  # the text is there, as text
    page.close()
