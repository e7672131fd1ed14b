"""A chapter read as several pages: a markdown cell whose metadata names a ``page`` (``# %% [markdown]
page="context"`` in the jupytext source) starts a page of its own, ``04_fusion_vs_elimination-context``, listed
under the chapter in the contents and numbered within it (4.2, Fig. 4.N). The chapter still executes once, as one
notebook; its executed copy is written as its pages, the first (``04_fusion_vs_elimination.ipynb``) holding the
record of what it was made from. The jupytext sources say which pages exist, so a clean checkout's contents do."""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jupytext

from verifylab.chapters.registry import CHAPTERS
from verifylab.errors import BookBuildError
from verifylab.iorw import atomic_write_text
from verifylab.publish.chapter_inputs import METADATA_KEY

PAGE_KEY = "page"  # the cell metadata key that starts a page
LATER_PAGES_KEY = "verifylab_pages"  # the first page's metadata: the stems of the chapter's later pages, in order
SLUG = re.compile(r"[a-z][a-z0-9_]*")
PAGE_STEM = re.compile(r"(\d\d_[a-z_]+?)(?:-([a-z][a-z0-9_]*))?")  # chapter, then the page's slug if not the first


def page_stem(chapter: str, slug: str | None) -> str:
    """``04_fusion_vs_elimination`` + ``context`` -> ``04_fusion_vs_elimination-context`` (the first page: the
    chapter's own name)."""
    return chapter if slug is None else f"{chapter}-{slug}"


def page_label(stem: str) -> str:
    """The target a later page's title carries: ``page-04_fusion_vs_elimination-context``."""
    return f"page-{stem}"


def chapter_of_page(stem: str) -> str:
    """The chapter a page belongs to: ``04_fusion_vs_elimination-context`` -> ``04_fusion_vs_elimination``."""
    match = PAGE_STEM.fullmatch(stem)
    return match.group(1) if match else stem


def _slug(cell: dict[str, Any], where: str) -> str | None:
    slug = cell.get("metadata", {}).get(PAGE_KEY)
    if slug is None:
        return None
    if cell.get("cell_type") != "markdown" or not isinstance(slug, str) or not SLUG.fullmatch(slug):
        raise BookBuildError(f"{where}: a page starts at a markdown cell named by lower-case letters, got {slug!r}")
    return slug


def page_slugs(cells: list[dict[str, Any]], where: str) -> list[str]:
    """The slugs of the pages after the first, in order; a repeated one is refused, naming it."""
    slugs = [s for s in (_slug(c, where) for c in cells) if s is not None]
    repeated = sorted({s for s in slugs if slugs.count(s) > 1})
    if repeated:
        raise BookBuildError(f"{where}: pages named twice: {', '.join(repeated)}")
    return slugs


def source_pages(source: Path) -> list[str]:
    """The page stems of the chapter whose jupytext source is ``source``, first page first."""
    cells = [dict(c) for c in jupytext.read(source).cells]
    return [source.stem, *(page_stem(source.stem, s) for s in page_slugs(cells, str(source)))]


def split_pages(notebook: dict[str, Any], chapter: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(page stem, notebook) for each page of an executed chapter: the cells from one page's start to the next.
    Every page keeps the notebook's metadata (kernel, language), only the first its record (:data:`METADATA_KEY`)
    and the list of the later pages, whose numbered links end it; each later page's title is a target for them."""
    cells = notebook.get("cells", [])
    page_slugs(cells, chapter)  # refuses a bad or repeated name before anything is written
    starts = [i for i, c in enumerate(cells) if _slug(c, chapter) is not None]
    later = [page_stem(chapter, cells[i]["metadata"][PAGE_KEY]) for i in starts]
    for n, (start, end) in enumerate(itertools.pairwise([0, *starts, len(cells)])):
        page = {k: v for k, v in notebook.items() if k != "cells"}
        if n:
            stem = later[n - 1]
            page["metadata"] = {k: v for k, v in notebook.get("metadata", {}).items() if k != METADATA_KEY}
            page["cells"] = [_labelled(cells[start], page_label(stem)), *cells[start + 1 : end]]
        else:
            stem = chapter
            page["metadata"] = copy.deepcopy(notebook.get("metadata", {})) | {LATER_PAGES_KEY: later}
            page["cells"] = cells[start:end] + ([_goes_on(chapter, later)] if later else [])
        yield stem, page


def _labelled(cell: dict[str, Any], label: str) -> dict[str, Any]:
    """A copy of a page's first cell (its title) with a MyST target before it."""
    text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return copy.deepcopy(cell) | {"source": f"({label})=\n{text}"}


def _goes_on(chapter: str, later: list[str]) -> dict[str, Any]:
    """The first page's last cell: the chapter's later pages, each a link with its number and title."""
    links = "\n".join(f"- {{numref}}`{{number}}. {{name}} <{page_label(stem)}>`" for stem in later)
    return {
        "cell_type": "markdown",
        "id": f"{chapter}-pages",
        "metadata": {},
        "source": f"The chapter goes on:\n\n{links}",
    }


def write_pages(notebook: dict[str, Any], target: Path) -> list[Path]:
    """Write an executed chapter as its pages beside ``target`` (each temp + rename), the first, ``target``, last:
    it holds the record, so a chapter cut short between two writes is executed again. Pages of an earlier
    layout that this one no longer has are removed. The paths written, first page first."""
    pages = list(split_pages(notebook, target.stem))
    written = [target.with_name(f"{stem}.ipynb") for stem, _ in pages]
    for path, (_, page) in reversed(list(zip(written, pages, strict=True))):
        atomic_write_text(path, json.dumps(page, indent=1, ensure_ascii=False) + "\n")
    for stale in set(later_pages(target)) - set(written):
        stale.unlink(missing_ok=True)
    return written


def later_pages(target: Path) -> list[Path]:
    """The page files after the first that sit beside the executed chapter ``target``."""
    return sorted(p for p in target.parent.glob(f"{target.stem}-*.ipynb") if PAGE_STEM.fullmatch(p.stem))


def discard_pages(target: Path) -> None:
    """Remove an executed chapter's pages (a chapter cut short or failed keeps none of its earlier run's)."""
    for path in [target, *later_pages(target)]:
        path.unlink(missing_ok=True)


def executed_pages(generated: Path) -> list[Path]:
    """Every executed chapter's pages in ``generated``, in book order: each chapter's first page, then the later
    pages its metadata lists that exist (a page never written is left out, not an error)."""
    pages = []
    for first in sorted(p for p in generated.glob("[0-9][0-9]_*.ipynb") if PAGE_STEM.fullmatch(p.stem)):
        if "-" in first.stem:
            continue
        later = json.loads(first.read_text(encoding="utf-8")).get("metadata", {}).get(LATER_PAGES_KEY, [])
        pages += [first, *(first.with_name(f"{stem}.ipynb") for stem in later)]
    return [p for p in pages if p.is_file()]


def book_pages(root: Path) -> list[str]:
    """The stems of every chapter page of the project at ``root``, in book order, read from the sources."""
    return [stem for chapter in CHAPTERS for stem in source_pages(chapter.notebook(root))]
