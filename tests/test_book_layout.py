"""The book read at 1400 and 800 px (#29): no table cell breaks a word (each cell's longest word measured against
its width), no table taller than 1.5 screens unless folded, no index column, no "ci95" header, chart text at
11 px or more with no label or legend cut, and each glossary term's first use on every page linked."""

from __future__ import annotations

from pathlib import Path

import pytest

from .browsing import CHROMIUM, FIRST_SCREENS, READ_PAGES, SCREEN_WIDTHS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)"),
]

PAGES = READ_PAGES


@pytest.mark.parametrize("width", SCREEN_WIDTHS)
@pytest.mark.parametrize("page", PAGES, ids=[Path(p).stem for p in PAGES])
def test_tables_and_charts_read_at_this_width(visited, page, width):
    seen = visited[page]["layout"][width]
    assert seen["broken"] == [], f"{page} at {width} px: cells break a word: {seen['broken'][:5]}"
    assert seen["wide"] == [], f"{page} at {width} px: wider than the text column: {seen['wide']}"
    assert seen["tall"] == [], f"{page} at {width} px: tables taller than 1.5 screens, not folded: {seen['tall']}"
    assert seen["index"] == [], f"{page}: a table shows an index column: {seen['index']}"
    assert seen["ci95"] == [], f"{page}: a header says ci95: {seen['ci95']}"
    assert seen["small"] == [], f"{page} at {width} px: chart text under 11 px: {seen['small'][:5]}"
    assert seen["truncated"] == [], f"{page} at {width} px: chart text cut: {seen['truncated']}"


def test_the_layout_checks_read_the_pages(visited):
    """The measurements above see cells and chart text (a check that reads nothing would pass anything)."""
    layout = visited["book/_generated/02_benchmarks.html"]["layout"][800]
    assert layout["cells"] > 100 and layout["chart_texts"] > 20 and layout["screen"] == 900


@pytest.mark.parametrize("page", PAGES, ids=[Path(p).stem for p in PAGES])
def test_each_glossary_term_is_linked_where_a_page_first_uses_it(visited, page):
    seen = visited[page]
    assert seen["terms_checked"] >= 30
    assert seen["unlinked_terms"] == [], f"{page}: first use not linked to the glossary: {seen['unlinked_terms']}"


FIRST_SCREEN_ANSWERS = (
    "Deploy fusion?",
    "Keep EAGLE-3?",
    "Eliminate all-reduces, and how?",
    "Turn speculation off under load?",
    "verifylab box --gpus 8",
)


@pytest.mark.parametrize("width", [w for w, _ in FIRST_SCREENS])
def test_the_decision_page_answers_on_its_first_screen(visited, width):
    """#51, #67: a reader who opens the decision page sees the four answers and the one command to run first without
    scrolling, at 1400 x 800 and 800 x 1000; each answer is a setting (on, off, up to how many streams, which
    collective) or the one command that settles it, and at most one says to measure first."""
    seen = visited["book/_generated/decision.html"]["first_screen"][width]
    missing = [answer for answer in FIRST_SCREEN_ANSWERS if answer not in seen]
    assert not missing, f"decision page at {width} px: below the first screen: {missing}"
    assert "streams" in seen  # the answers carry their numbers, not only their questions
    assert "How to read this book" not in seen  # the fold is measured: the page's last section lies below it
    answers = list(dict.fromkeys(line for line in seen.split("\n") if line.startswith(FIRST_SCREEN_ANSWERS[:4])))
    assert len(answers) == 4, answers
    settings = ("On at", "Off", "Yes", "No", "The fastest", "By context", "measure first")
    assert all(any(word in a for word in settings) for a in answers), answers
    assert sum("measure first" in a or "not resolved" in a for a in answers) <= 1, answers
