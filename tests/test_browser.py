"""Open the built book in Debian's headless Chromium with every non-local request blocked."""

from __future__ import annotations

import shutil
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)"),
]
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture(scope="module")
def book_url(built_book: Path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(built_book)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield instance
        instance.close()


def open_page(browser, url: str):
    """Load ``url`` blocking every non-local request; returns (page, console errors, blocked urls)."""
    page = browser.new_page()
    errors: list[str] = []
    blocked: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def route(request_route):
        target = request_route.request.url
        if target.startswith(("http://127.0.0.1", "data:", "about:")):
            request_route.continue_()
        else:
            blocked.append(target)
            request_route.abort()

    page.route("**/*", route)
    page.goto(url, wait_until="networkidle")
    return page, errors, blocked


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


def _pages(built_book: Path) -> list[Path]:
    return sorted(p for p in built_book.rglob("*.html") if "_static" not in p.parts)


def test_every_page_opens_offline_draws_its_charts_and_has_no_console_errors(browser, book_url, built_book):
    for path in _pages(built_book):
        rel = path.relative_to(built_book).as_posix()
        page, errors, blocked = open_page(browser, f"{book_url}/{rel}")
        for figure in page.locator("figure.verifylab-chart").all():
            assert figure.locator("svg [class^='mark-'] path, svg [class^='mark-'] line").count() > 0, (
                f"{rel}: a chart has no marks"
            )
        assert blocked == [], f"{rel}: requests left the machine: {blocked}"
        assert errors == [], f"{rel}: console errors: {errors}"
        page.close()


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
    for path in _pages(built_book):
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
    assert "Fusion vs elimination, in numbers" in page.content()
    target = repo_root / "_build" / "test-artifacts" / "decision.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target), full_page=True)
    print(f"decision screenshot: {target}")
    assert target.stat().st_size > 10_000 and errors == [] and blocked == []
    page.close()
