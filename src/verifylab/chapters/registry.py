"""The book's chapters, declared once. Everything that lists chapters reads :data:`CHAPTERS`: the pipeline (which
notebooks run, in which order), the table of contents, the PDFs, ``verifylab notebook``/``run --only``, each
chapter's parameters and the tests. Adding a chapter is one entry here, its ``Params`` in ``chapters/params.py``,
its module ``chapters/chNN_name.py`` and its notebook ``notebooks/NN_name.py`` (CONTRIBUTING.md, "A new chapter")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from verifylab.chapters._base import ChapterParams
from verifylab.chapters.params import (
    Benchmarks,
    EnvironmentAndGates,
    FusionVsElimination,
    Introduction,
    Recommendations,
    VerifyBreakdown,
)
from verifylab.errors import ParameterError, describe_error

Part = Literal["Background", "Chapters"]  # the table of contents' captions (chapters of "Chapters" are numbered)


@dataclass(frozen=True)
class Chapter:
    """One chapter: its parameters model (whose ``chapter`` is the chapter's name) and where the contents lists it."""

    params: type[ChapterParams]
    part: Part

    @property
    def name(self) -> str:
        """``02_benchmarks``: the notebook's stem, the executed page's name, the key of its parameters."""
        return self.params.chapter

    @property
    def number(self) -> str:
        return self.name[:2]

    @property
    def module(self) -> str:
        """The module the notebook calls into."""
        return f"verifylab.chapters.ch{self.name}"

    def notebook(self, root: Path) -> Path:
        """The chapter's jupytext source in the project at ``root``."""
        return root / "notebooks" / f"{self.name}.py"


CHAPTERS: tuple[Chapter, ...] = (
    Chapter(Introduction, "Background"),
    Chapter(EnvironmentAndGates, "Chapters"),
    Chapter(Benchmarks, "Chapters"),
    Chapter(VerifyBreakdown, "Chapters"),
    Chapter(FusionVsElimination, "Chapters"),
    Chapter(Recommendations, "Chapters"),
)
CHAPTER_PARAMS: dict[str, type[ChapterParams]] = {c.name: c.params for c in CHAPTERS}
APPENDIX = ("book/glossary", "book/methods", "book/_generated/changes")  # after the chapters, unnumbered


def chapter_named(name_or_number: str) -> Chapter:
    """A chapter by its name (``02_benchmarks``) or number (``02``); an unknown one lists the chapters."""
    for chapter in CHAPTERS:
        if name_or_number in (chapter.name, chapter.number):
            return chapter
    raise ParameterError(f"no chapter '{name_or_number}'; chapters are {', '.join(CHAPTER_PARAMS)}")


def table_of_contents(
    root_page: str, generated: str, runs: Sequence[str] = (), pages: dict[str, list[str]] | None = None
) -> str:
    """The book's ``_toc.yml``: the root page, then each part's chapters in order (a chapter's later ``pages``,
    by name, as its sections), then the appendix, whose last entry is the index of ``runs``' pages (one section
    each)."""
    lines = ["format: jb-book", f"root: {generated}/{root_page}", "parts:"]
    for part in dict.fromkeys(c.part for c in CHAPTERS):
        lines += [f"  - caption: {part}", *(["    numbered: true"] if part == "Chapters" else []), "    chapters:"]
        for chapter in (c for c in CHAPTERS if c.part == part):
            lines.append(f"      - file: {generated}/{chapter.name}")
            later = (pages or {}).get(chapter.name, [])[1:]
            lines += ["        sections:", *(f"          - file: {generated}/{p}" for p in later)] if later else []
    lines += ["  - caption: Appendix", "    chapters:", *(f"      - file: {page}" for page in APPENDIX)]
    if runs:
        lines += [f"      - file: {generated}/runs/index", "        sections:"]
        lines += [f"          - file: {generated}/runs/{run}" for run in runs]
    return "\n".join(lines) + "\n"


def chapter_parameters(chapter: str, **values: Any) -> Any:
    """A notebook's parameters, every one validated; :class:`ParameterError` with one line naming the chapter and
    the parameter otherwise."""
    return CHAPTER_PARAMS[chapter].validated(**values)


def parameters_for(chapter: str, values: dict[str, Any]) -> dict[str, Any]:
    """The values a chapter declares (its parameters cell = its Params model): shared parameters that belong to
    other chapters are left out, so papermill never warns about a parameter the notebook does not take."""
    model = CHAPTER_PARAMS.get(chapter)
    return {k: v for k, v in values.items() if model is None or k in model.model_fields}


def check_pipeline_chapters(shared: dict[str, Any], chapters: dict[str, dict[str, Any]], where: str) -> None:
    """Before any chapter runs: every chapter named exists, its overrides are its parameters with valid values, and
    every shared parameter is one that some chapter takes (papermill gives each chapter only those it declares)."""
    unknown = [name for name in chapters if name not in CHAPTER_PARAMS]
    if unknown:
        raise ParameterError(f"{where}: chapters {unknown} do not exist; chapters are {', '.join(CHAPTER_PARAMS)}")
    taken = {field for model in CHAPTER_PARAMS.values() for field in model.model_fields}
    stray = sorted(set(shared) - taken)
    if stray:
        raise ParameterError(f"{where}: parameters {stray} are taken by no chapter")
    for name, model in CHAPTER_PARAMS.items():
        values = {k: v for k, v in shared.items() if k in model.model_fields} | chapters.get(name, {})
        values.pop("data_dir", None)  # checked where the chapter runs (relative to the project root)
        try:
            model.model_validate(values)
        except ValidationError as exc:
            raise ParameterError(describe_error(exc, f"{where}: {name}")) from None
