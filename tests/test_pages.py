"""A chapter read as several pages (``publish.pages``): the executed notebook is cut at each cell that names a page,
each page written whole, the first last (it holds the record), pages of an earlier layout removed; a bad or
repeated page name is refused by name; the book's pages follow the sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifylab.errors import BookBuildError
from verifylab.publish.chapter_inputs import METADATA_KEY
from verifylab.publish.pages import (
    LATER_PAGES_KEY,
    book_pages,
    chapter_of_page,
    discard_pages,
    executed_pages,
    source_pages,
    write_pages,
)

REPO = Path(__file__).resolve().parents[1]


def _cell(text: str, page: str | None = None, kind: str = "markdown") -> dict:
    return {"cell_type": kind, "metadata": {"page": page} if page else {}, "source": text}


def _notebook(*cells: dict) -> dict:
    return {"cells": list(cells), "metadata": {"kernelspec": {"name": "python3"}, METADATA_KEY: {"inputs": "x"}}}


def test_an_executed_chapter_is_written_as_its_pages_first_page_holding_the_record(tmp_path):
    target = tmp_path / "04_fusion_vs_elimination.ipynb"
    nb = _notebook(
        _cell("# Four"), _cell("x = 1", kind="code"), _cell("# Context", "context"), _cell("# Public", "public")
    )
    written = write_pages(nb, target)
    assert [p.name for p in written] == [
        "04_fusion_vs_elimination.ipynb",
        "04_fusion_vs_elimination-context.ipynb",
        "04_fusion_vs_elimination-public.ipynb",
    ]
    first, context, public = (json.loads(p.read_text()) for p in written)
    assert [c["source"] for c in first["cells"][:2]] == ["# Four", "x = 1"]
    goes_on = first["cells"][-1]["source"]  # the first page ends by linking the chapter's later pages, in order
    assert goes_on.endswith(
        "- {numref}`{number}. {name} <page-04_fusion_vs_elimination-context>`\n"
        "- {numref}`{number}. {name} <page-04_fusion_vs_elimination-public>`"
    )
    assert context["cells"][0]["source"] == "(page-04_fusion_vs_elimination-context)=\n# Context"  # the target
    assert len(first["cells"]) == 3
    assert len(context["cells"]) == 1 and public["cells"][0]["source"].endswith("\n# Public")
    assert first["metadata"][METADATA_KEY] == {"inputs": "x"} and METADATA_KEY not in context["metadata"]
    assert context["metadata"]["kernelspec"] == {"name": "python3"}
    assert first["metadata"][LATER_PAGES_KEY] == [p.stem for p in written[1:]]
    assert executed_pages(tmp_path) == written
    assert {chapter_of_page(p.stem) for p in written} == {"04_fusion_vs_elimination"}


def test_a_page_the_new_layout_drops_is_removed_and_a_discarded_chapter_keeps_none(tmp_path):
    target = tmp_path / "02_benchmarks.ipynb"
    write_pages(_notebook(_cell("# Two"), _cell("# Old", "old")), target)
    assert "<page-02_benchmarks-old>" in target.read_text()
    assert (tmp_path / "02_benchmarks-old.ipynb").is_file()
    write_pages(_notebook(_cell("# Two"), _cell("# New", "new")), target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["02_benchmarks-new.ipynb", "02_benchmarks.ipynb"]
    (tmp_path / "02_benchmarks.failed.ipynb").write_text("{}")  # a failed copy is not a page
    discard_pages(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["02_benchmarks.failed.ipynb"]


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        ((_cell("# A"), _cell("# B", "Bad Name")), "lower-case letters, got 'Bad Name'"),
        ((_cell("# A"), _cell("x = 1", "code", kind="code")), "a page starts at a markdown cell"),
        ((_cell("# A"), _cell("# B", "same"), _cell("# C", "same")), "pages named twice: same"),
    ],
)
def test_a_bad_page_name_is_refused_naming_it_and_nothing_is_written(tmp_path, cells, message):
    with pytest.raises(BookBuildError, match=message):
        write_pages(_notebook(*cells), tmp_path / "01_environment_and_gates.ipynb")
    assert list(tmp_path.iterdir()) == []


def test_the_books_pages_are_read_from_the_sources_and_each_later_page_opens_with_a_title():
    pages = book_pages(REPO)
    assert pages[0] == "00_introduction" and "04_fusion_vs_elimination-context" in pages
    for source in sorted((REPO / "notebooks").glob("*.py")):
        stems = source_pages(source)
        assert stems[0] == source.stem and all(s.startswith(source.stem + "-") for s in stems[1:])
    text = (REPO / "notebooks" / "04_fusion_vs_elimination.py").read_text()
    for block in text.split('# %% [markdown] page="')[1:]:
        assert block.split("\n", 2)[1].startswith("# # "), f"page {block.split(chr(34))[0]} opens without a title"


def test_a_failed_chapter_says_so_on_every_page_even_those_it_never_reached(tmp_path):
    import nbformat

    from verifylab.publish.build import ChapterResult
    from verifylab.publish.pipeline import _failure_page

    (tmp_path / "notebooks").mkdir()
    source = (
        '# %% [markdown]\n# # Four\n\n# %% [markdown] page="context"\n# # C\n\n# %% [markdown] page="public"\n# # P\n'
    )
    (tmp_path / "notebooks" / "04_fusion_vs_elimination.py").write_text(source)
    out = tmp_path / "gen" / "04_fusion_vs_elimination.ipynb"
    out.parent.mkdir()
    context = nbformat.v4.new_markdown_cell("# C")
    context.metadata["page"] = "context"
    cells = [nbformat.v4.new_markdown_cell("# Four"), nbformat.v4.new_code_cell("1 / 0"), context]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), out.with_suffix(".failed.ipynb"))  # cut short: no "public"
    _failure_page(ChapterResult(out.stem, out, ok=False, error="ZeroDivisionError: boom"), tmp_path)
    pages = [out, out.with_name(f"{out.stem}-context.ipynb"), out.with_name(f"{out.stem}-public.ipynb")]
    assert sorted(out.parent.iterdir()) == sorted(pages)  # the failed copy is consumed
    for page in pages:
        assert "This chapter failed in this run: ZeroDivisionError: boom" in page.read_text(), page.name
