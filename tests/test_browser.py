"""Open the built book in Debian's headless Chromium, offline: every request but a loopback one fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from .browsing import CHROMIUM, LONGEST, open_page, pages

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)"),
]


def test_introduction_chart_draws_offline_without_console_errors(browser, book_url, tmp_path):
    page, errors, blocked = open_page(browser, f"{book_url}/book/_generated/00_introduction.html")
    marks = page.locator("figure.verifylab-chart svg .mark-rect path")
    assert marks.count() >= 10  # one bar per reported throughput figure
    box = page.locator("figure.verifylab-chart svg").first.bounding_box()
    assert box and box["width"] > 100 and box["height"] > 100
    assert page.locator("figure.verifylab-chart svg title").count() >= 10  # tooltips kept
    page.screenshot(path=str(tmp_path / "introduction.png"), full_page=True)
    assert blocked == [], f"requests left the machine: {blocked}"
    assert errors == [], f"console errors: {errors}"
    page.close()


def test_a_request_that_would_leave_the_machine_fails_and_is_noted(browser):
    """What the offline checks rest on: a page's remote image and stylesheet (a name, an address) never load
    and are listed as blocked; the page itself still loads."""
    remote = ["http://203.0.113.9/chart.png", "https://fonts.example.com/font.css"]
    html = f'<img src="{remote[0]}"><link rel="stylesheet" href="{remote[1]}"><p>local</p>'
    page, _, blocked = open_page(browser, "data:text/html," + html)
    assert page.inner_text("body") == "local"
    assert sorted(blocked) == sorted(remote)
    page.close()


def _pages(built_book: Path) -> list[Path]:
    return sorted(p for p in built_book.rglob("*.html") if "_static" not in p.parts)


def test_every_page_opens_offline_draws_its_charts_and_has_no_console_errors(visited):
    for rel, seen in visited.items():
        assert all(marks > 0 for marks in seen["marks"]), f"{rel}: a chart has no marks"
        assert seen["blocked"] == [], f"{rel}: requests left the machine: {seen['blocked']}"
        assert seen["errors"] == [], f"{rel}: console errors: {seen['errors']}"


def test_no_page_scrolls_sideways_on_a_phone(visited):
    """Issue 71: at 390 px every page fits the screen's width; a table wider than that scrolls inside its own box."""
    wide = {
        rel: seen["sideways"]
        for rel, seen in visited.items()
        if seen["sideways"]["scroll"] > seen["sideways"]["client"] + 1
    }
    assert wide == {}, wide


def test_no_page_is_longer_than_15_screens_with_every_fold_open(visited):
    """Issue 71: a chapter too long for one page is read as several (``publish.pages``) and a long table's folded
    rows scroll in their own box, so no page of the book, every fold open, passes 15 screens of 1400 x 800."""
    width, height, most = LONGEST
    lengths = {rel: seen["length"] for rel, seen in visited.items()}
    assert sum(seen["folds"] for seen in lengths.values()) > 20  # the folds were found and opened
    assert max(seen["screens"] for seen in lengths.values()) > 5  # and the lengths read
    long = {rel: round(seen["screens"], 1) for rel, seen in lengths.items() if seen["screens"] > most}
    assert long == {}, f"longer than {most} screens of {width} x {height}: {long}"


def test_no_internal_link_is_broken(built_book):
    from html.parser import HTMLParser
    from urllib.parse import unquote, urlparse

    class Links(HTMLParser):
        def __init__(self):
            super().__init__()
            self.targets: list[str] = []

        def handle_starttag(self, tag, attrs):
            for name, value in attrs:
                if name in ("href", "src") and value:
                    self.targets.append(value)

    broken = []
    for path in pages(built_book):
        parser = Links()
        parser.feed(path.read_text(encoding="utf-8"))
        for target in parser.targets:
            url = urlparse(target)
            if url.scheme or target.startswith(("#", "mailto:", "data:", "javascript:")):
                continue
            resolved = (path.parent / unquote(url.path)).resolve()
            if url.path and not resolved.exists():
                broken.append(f"{path.relative_to(built_book)} -> {target}")
    assert broken == []


def test_decision_page_screenshot_is_attached(browser, book_url, built_book, repo_root):
    page, errors, blocked = open_page(browser, f"{book_url}/book/_generated/decision.html")
    assert "The answers, for a box with healthy PCIe P2P" in page.content()
    target = repo_root / "_build" / "test-artifacts" / "decision.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target), full_page=True)
    print(f"decision screenshot: {target}")
    assert target.stat().st_size > 10_000 and errors == [] and blocked == []
    page.close()
