"""Where the PDFs cannot be printed, `make book` says why and how to get what is missing, and writes nothing."""

from __future__ import annotations

import sys

from verifylab.publish import pdf


def test_without_chromium_the_pdfs_are_skipped_saying_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setattr(pdf.shutil, "which", lambda name: None)
    written, why = pdf.print_pdfs(tmp_path / "html", tmp_path / "pdf", ["decision"])
    assert written == [] and not (tmp_path / "pdf").exists()
    assert "no Chromium on PATH" in why and "apt-get install chromium" in why


def test_without_playwright_the_pdfs_are_skipped_saying_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setattr(pdf, "chromium", lambda: "/usr/bin/chromium")
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)  # import fails as if it were not installed
    written, why = pdf.print_pdfs(tmp_path / "html", tmp_path / "pdf", ["decision"])
    assert written == [] and not (tmp_path / "pdf").exists()
    assert "playwright is not installed" in why and "requirements/book.lock" in why
