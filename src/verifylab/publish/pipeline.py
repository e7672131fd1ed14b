"""The one-command pipeline: chapters 01-05 in order with papermill (live or replay), then the edition.

A failing chapter is recorded with its error and rendered as such; later chapters run on what exists.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import nbformat
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from verifylab.chapters.registry import chapter_named, check_pipeline_chapters, parameters_for
from verifylab.errors import ParameterError, VerifylabError, describe_error
from verifylab.iorw import atomic_write_text
from verifylab.publish.build import (
    REPLAY_WORKERS,
    BookResult,
    ChapterResult,
    chapter_sources,
    execute_chapters,
    execute_stale_chapters,
    render_edition,
    run_parameters,
)
from verifylab.publish.pages import PAGE_KEY, source_pages, write_pages
from verifylab.publish.paths import GENERATED
from verifylab.report.section import md_text
from verifylab.strict_yaml import read_strict_yaml_file


class PipelineParams(BaseModel):
    """``params.yaml``: mode, data folder, parameters for every chapter, and per-chapter overrides."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["replay", "live"] = "replay"
    data_dir: str = "data"
    run_id: str | None = None
    parameters: dict[str, Any] = Field(default_factory=dict, description="passed to every chapter")
    chapters: dict[str, dict[str, Any]] = Field(default_factory=dict, description="chapter name -> overrides")
    _checked: bool = PrivateAttr(default=False)  # every chapter's parameters validated (load_params does it)

    def check_chapters(self, where: str) -> PipelineParams:
        """Every chapter's parameters as it will get them (mode and run id included) validated, once."""
        if not self._checked:
            shared = {"mode": self.mode, "run_id": self.run_id, **self.parameters}
            check_pipeline_chapters(shared, self.chapters, where)
            self._checked = True
        return self


def load_params(path: Path) -> PipelineParams:
    data = read_strict_yaml_file(path, "parameters", ParameterError)
    try:
        params = PipelineParams.model_validate(data)
    except ValidationError as exc:
        raise ParameterError(describe_error(exc, str(path))) from None
    return params.check_chapters(str(path))


def _failure_page(result: ChapterResult, root: Path) -> None:
    """Render a failed chapter: its executed notebook (with the error) as its pages, each under the warning, or
    a stub for each page."""
    failed = result.output.with_suffix(".failed.ipynb")
    warning = (  # the error is free text (a server's words): escaped, never a code span
        f"```{{warning}}\nThis chapter failed in this run: {md_text(result.error or 'no error recorded')}. Later "
        "chapters ran on the data that exists. The cells below show where it stopped.\n```"
    )
    note = nbformat.v4.new_markdown_cell(warning)
    if failed.is_file():
        nb = nbformat.read(failed, as_version=4)
        title = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), -1)
        starts = [i for i, c in enumerate(nb.cells) if PAGE_KEY in c.get("metadata", {})]  # each later page's title
        for at in sorted({title, *starts}, reverse=True):
            nb.cells.insert(at + 1, nbformat.v4.new_markdown_cell(warning))
        failed.unlink()
    else:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {md_text(result.name)}"), note])
    written = write_pages(json.loads(nbformat.writes(nb)), result.output)  # each page whole or not at all
    source = root / "notebooks" / f"{result.name}.py"
    for stem in source_pages(source) if source.is_file() else []:  # the pages it never reached: the note on each
        if result.output.with_name(f"{stem}.ipynb") not in written:
            stub = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {md_text(stem)}"), note])
            atomic_write_text(result.output.with_name(f"{stem}.ipynb"), nbformat.writes(stub))


def select_chapters(sources: list[Path], only: list[str] | None) -> list[Path]:
    """The chapter sources named by ``only`` (names or numbers, e.g. '02'), in book order."""
    if not only:
        return sources
    try:
        wanted = {chapter_named(name.strip()).name for name in only if name.strip()}
    except ParameterError as exc:
        raise ParameterError(f"--only: {exc}") from None
    return [s for s in sources if s.stem in wanted]


def chapter_jobs(
    params: PipelineParams, sources: list[Path], mode: str | None = None
) -> list[tuple[Path, dict[str, Any]]]:
    """(chapter, its parameters) for each source: the shared values, then its own overrides, then ``mode`` when
    given; each chapter gets only the parameters it declares."""
    shared = run_parameters(params.mode, params.data_dir, params.run_id, params.parameters)
    forced = {"mode": mode} if mode else {}
    return [(s, parameters_for(s.stem, shared | params.chapters.get(s.stem, {}) | forced)) for s in sources]


class RunInterrupted(VerifylabError):
    """Ctrl-C stopped a run: ``chapters`` says which completed, which were cut short and which never started."""

    def __init__(self, chapters: list[ChapterResult]) -> None:
        super().__init__("interrupted (Ctrl-C)")
        self.chapters = chapters

    @property
    def to_resume(self) -> list[str]:
        """The chapters to run again: those cut short or never started (their two-digit numbers)."""
        return [c.name.split("_", 1)[0] for c in self.chapters if not c.ok]


def run_pipeline(
    root: Path,
    params: PipelineParams,
    on_chapter: Callable[[str, int, int], None] | None = None,
    on_cell: Callable[[int, int], None] | None = None,
    only: list[str] | None = None,
    render: bool = True,
) -> BookResult:
    """Execute the chapters (all, or ``only`` those) in order with ``params`` (in replay mode a chapter whose inputs
    are those its executed copy was made from is kept, as ``verifylab book`` keeps it); render and archive the
    edition unless ``render`` is False (a campaign split over several sessions renders once, at the end)."""
    params.check_chapters("params")  # all of them, before any work (once: load_params has done it)
    result = BookResult()
    jobs = chapter_jobs(params, select_chapters(chapter_sources(root), only))
    result.chapters = execute_stale_chapters(root, jobs, on_chapter, on_cell)  # replay: unchanged ones are kept
    if any(chapter.interrupted for chapter in result.chapters):
        raise RunInterrupted(result.chapters)  # nothing rendered: the caller says what completed and how to resume
    for chapter in result.chapters:
        if not chapter.ok:
            _failure_page(chapter, root)
    if not render:
        return result
    result.chapters += replay_missing_chapters(root, params, on_chapter, on_cell)
    return render_edition(root, root / params.data_dir, result)


def replay_missing_chapters(
    root: Path,
    params: PipelineParams,
    on_chapter: Callable[[str, int, int], None] | None = None,
    on_cell: Callable[[int, int], None] | None = None,
) -> list[ChapterResult]:
    """Before a render: chapters never executed in this project (a campaign split with ``--only`` whose first
    part skipped them) are replayed from the data folder, so the book is whole; marked ``replayed``."""
    missing = [s for s in chapter_sources(root) if not (root / GENERATED / f"{s.stem}.ipynb").is_file()]
    replayed = execute_chapters(root, chapter_jobs(params, missing, mode="replay"), on_chapter, on_cell, REPLAY_WORKERS)
    for chapter in replayed:
        chapter.replayed = True
        if not chapter.ok:
            _failure_page(chapter, root)
    return replayed
