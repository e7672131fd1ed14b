"""The decision page and every chapter printed to PDF with the headless Chromium the browser tests use
(offline: pages are opened from disk). Optional: without Chromium or playwright it says why it skipped."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verifylab.iorw import atomic_path
from verifylab.publish.paths import GENERATED

UNFOLD = "document.querySelectorAll('details').forEach(d => { d.open = true; })"


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def print_pdfs(html_root: Path, folder: Path, pages: list[str]) -> tuple[list[Path], str]:
    """Print ``pages`` (stems) of ``html_root/book/_generated`` into ``folder``; (the PDFs, or [] and why none). Runs
    in its own thread: playwright's sync API refuses a thread that already runs an event loop (a notebook, a
    test session holding a browser)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_print_pdfs, html_root, folder, pages).result()


def _print_pdfs(html_root: Path, folder: Path, pages: list[str]) -> tuple[list[Path], str]:
    executable = chromium()
    if executable is None:
        return [], (
            "no Chromium on PATH, as chromium or chromium-browser (Debian: apt-get install chromium; playwright's "
            "own download is not needed): PDFs skipped"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return [], (
            "playwright is not installed (make book installs it from requirements/book.lock; elsewhere pip install "
            "playwright, no browser download needed): PDFs skipped"
        )
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable)
        try:
            page = browser.new_page()
            page.route("http*://**", lambda route: route.abort())  # offline: the book needs nothing remote
            for name in pages:
                source = html_root / GENERATED / f"{name}.html"
                if not source.is_file():
                    continue
                page.goto(source.resolve().as_uri())  # a file URI needs an absolute path
                page.evaluate(UNFOLD)  # paper cannot be clicked: a folded table's rows are printed
                target = folder / f"{name}.pdf"
                with atomic_path(target) as tmp:
                    page.pdf(path=str(tmp), format="A4", print_background=True)
                written.append(target)
        finally:
            browser.close()
    return written, f"{len(written)} PDFs in {folder}"
