"""The chapters are declared once (``chapters/registry.py``): every notebook is registered and every registered
chapter has its notebook and module; no other source file lists chapters; the contents and PDFs follow it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from verifylab.chapters.registry import CHAPTERS, chapter_named, table_of_contents
from verifylab.errors import ParameterError
from verifylab.publish.pages import book_pages, source_pages

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "verifylab"
DECLARED_IN = {"chapters/registry.py", "chapters/params.py"}  # the registry, and each Params naming its chapter


def test_every_notebook_is_a_registered_chapter_with_its_module():
    assert [c.name for c in CHAPTERS] == sorted(p.stem for p in (REPO / "notebooks").glob("*.py"))
    for chapter in CHAPTERS:
        assert chapter.notebook(REPO).is_file()
        assert importlib.import_module(chapter.module).Params is chapter.params


def test_no_other_source_file_lists_the_chapters():
    names = {c.name for c in CHAPTERS}
    listing = {}
    for path in sorted(SRC.rglob("*.py")):
        where = path.relative_to(SRC).as_posix()
        strings = {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)}
        named = {name for name in names for s in strings if isinstance(s, str) and name in s}
        if len(named) > 1 and where not in DECLARED_IN:
            listing[where] = sorted(named)
    assert listing == {}


def test_contents_follow_the_registry_and_each_chapters_pages():
    toc = table_of_contents("decision", "book/_generated")
    files = [line.split("file: ")[1] for line in toc.splitlines() if "file: " in line]
    chapters = [f.rsplit("/", 1)[1] for f in files if f.startswith("book/_generated/0")]
    assert chapters == [c.name for c in CHAPTERS] and toc.startswith("format: jb-book\nroot: book/_generated/decision")
    assert "numbered: true" in toc and files[-1] == "book/_generated/changes"
    pages = {c.name: source_pages(c.notebook(REPO)) for c in CHAPTERS}
    paged = table_of_contents("decision", "book/_generated", pages=pages)
    listed = [
        line.split("file: book/_generated/")[1] for line in paged.splitlines() if "file: book/_generated/0" in line
    ]
    assert listed == book_pages(REPO) == [p for c in CHAPTERS for p in pages[c.name]]
    assert "        sections:\n          - file: book/_generated/04_fusion_vs_elimination-context" in paged


def test_a_chapter_is_found_by_number_or_name_and_an_unknown_one_lists_them():
    assert chapter_named("02") is chapter_named("02_benchmarks") is CHAPTERS[2]
    with pytest.raises(ParameterError, match=r"no chapter '7'; chapters are 00_introduction, 01_"):
        chapter_named("7")


def test_the_committed_toc_is_the_registrys(tmp_path):
    """``_toc.yml`` sits at the root (where a Jupyter Book user looks) and says what the registry and the stored runs
    say; a chapter added to the registry, or a run stored, without ``make toc`` fails here (#54 item 1)."""
    from verifylab.publish.toc import TOC_FILE, toc_text, write_toc

    root = Path(__file__).resolve().parents[1]
    assert (root / TOC_FILE).read_text(encoding="utf-8") == toc_text(root), "run make toc"
    # the check can fail: a store with one run more gives another contents
    (tmp_path / "data" / "runs" / "20990101-000000-new").mkdir(parents=True)
    (tmp_path / "data" / "runs" / "20990101-000000-new" / "manifest.json").write_text("{}")
    assert "runs/20990101-000000-new" in toc_text(tmp_path) != toc_text(root)
    assert write_toc(tmp_path).read_text(encoding="utf-8") == toc_text(tmp_path)
