"""The book pipeline: jupytext sources -> papermill execution (into ``book/_generated``) -> Jupyter Book 1.

Chapters are executed once, by papermill, with validated parameters; the book renders those executed
copies (``execute_notebooks: "off"``). A chapter that fails is reported by name with its error.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifylab.chapters.registry import CHAPTERS, parameters_for
from verifylab.errors import BookBuildError, VerifylabError
from verifylab.iorw import atomic_write_text
from verifylab.publish import interrupt
from verifylab.publish.chapter_inputs import METADATA_KEY, ChapterInputs
from verifylab.publish.chapter_reads import Reads, read_log
from verifylab.publish.edition import archive, write_generated_pages
from verifylab.publish.finding import Finding
from verifylab.publish.html_render import render_html
from verifylab.publish.pages import book_pages, discard_pages, write_pages
from verifylab.publish.paths import EXPORTS, GENERATED
from verifylab.publish.pdf import print_pdfs
from verifylab.publish.render_key import changed_inputs, last_render, record_render, render_inputs
from verifylab.publish.toolchain import toolchain_versions
from verifylab.redact import redact_text, scrub, secret_values, strip_terminal_codes
from verifylab.store.digests import code_digest, data_files
from verifylab.store.evidence import Evidence

CellProgress = Callable[[int, int], None]  # (cells done, cells in the chapter)
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
# the kernel's own log (a transport notice, the interrupt papermill sends at shutdown) is not the reader's
# business: a chapter's errors reach the reader through papermill, not the kernel's stderr
QUIET_KERNEL = ["--IPKernelApp.log_level=CRITICAL"]


@dataclass
class ChapterResult:
    """Outcome of executing one chapter notebook."""

    name: str
    output: Path
    ok: bool
    error: str | None = None
    replayed: bool = False  # run from stored data to complete a render, not one of the chapters asked for
    reused: bool = False  # not executed: its inputs (notebook, parameters, code, data, toolchain) had not changed
    changed: list[str] = field(default_factory=list)  # executed because these inputs changed (ChapterInputs.changed)
    interrupted: bool = False  # Ctrl-C ended it (or kept it from starting)
    kernel_log: str = ""  # the end of the kernel's own log, when the kernel died


@dataclass
class BookResult:
    """What a build produced: per-chapter outcomes and the index page."""

    chapters: list[ChapterResult] = field(default_factory=list)
    index_html: Path | None = None
    edition: dict = field(default_factory=dict)
    edition_dir: Path | None = None
    pdfs: list[Path] = field(default_factory=list)
    pdf_note: str = ""  # how many PDFs were printed, or why none
    rendered: list[str] = field(default_factory=list)  # the render's inputs that changed ([]: nothing rendered)

    @property
    def failed(self) -> list[ChapterResult]:
        return [c for c in self.chapters if not c.ok]


def project_root(start: Path | None = None) -> Path:
    """The folder holding ``_config.yml`` and ``notebooks/``, searching upwards from ``start``."""
    here = (start or Path.cwd()).resolve()
    for candidate in [here, *here.parents]:
        if (candidate / "_config.yml").is_file() and (candidate / "notebooks").is_dir():
            return candidate
    raise BookBuildError(f"no verifylab project (with _config.yml and notebooks/) at or above {here}")


def chapter_sources(root: Path) -> list[Path]:
    """The chapter notebooks (jupytext percent-format ``.py``) the registry declares, in chapter order; a missing
    one is named."""
    sources = [chapter.notebook(root) for chapter in CHAPTERS]
    missing = [s.name for s in sources if not s.is_file()]
    if missing:
        raise BookBuildError(f"{root / 'notebooks'}: chapter notebooks missing: {', '.join(missing)}")
    return sources


def to_notebook(source: Path, target: Path) -> None:
    """Convert a chapter's jupytext ``.py`` to ``.ipynb`` with a Python kernelspec (papermill cannot read ``.py``)
    and its parameters cell written from the chapter's ``Params`` (names, defaults, comments)."""
    import jupytext

    from verifylab.chapters.notebook_cell import with_parameters

    text = with_parameters(source.read_text(encoding="utf-8"), source.stem, source)
    notebook = jupytext.reads(text, fmt="py:percent")
    notebook.metadata["kernelspec"] = dict(KERNELSPEC)
    atomic_write_text(target, jupytext.writes(notebook, fmt="ipynb") + "\n")  # whole, or the old file kept


def execute_chapter(
    source: Path,
    output: Path,
    parameters: dict[str, Any],
    cwd: Path,
    on_cell: CellProgress | None = None,
    inputs: ChapterInputs | None = None,
) -> ChapterResult:
    """Execute one chapter with papermill into ``output``; the output is replaced only on success, with the digest
    of what it was made from (``inputs`` and what its kernel read of the data folder, :mod:`chapter_reads`) in its
    metadata. ``on_cell(done, total)`` hears every finished cell."""
    import papermill
    from nbclient.exceptions import DeadKernelError

    from verifylab.publish.cell_progress import ENGINE
    from verifylab.publish.ipc_kernel import IpcKernelManager

    output.parent.mkdir(parents=True, exist_ok=True)
    stop = interrupt.CURRENT

    def cell_done(done: int, total: int) -> None:
        if on_cell is not None:
            on_cell(done, total)
        stop.after_cell()  # Ctrl-C: the chapter ends after this cell

    with tempfile.TemporaryDirectory(prefix="verifylab-nb-") as tmp:
        src_nb = Path(tmp) / f"{source.stem}.ipynb"
        out_nb = Path(tmp) / f"{source.stem}.out.ipynb"
        reads_log = Path(tmp) / "reads.jsonl"
        kernel_arguments = list(QUIET_KERNEL)
        if inputs is not None:  # the kernel logs what it reads of the data folder from its first line on
            where = f"{str(inputs.data_dir)!r}, {str(reads_log)!r}"
            track = f"from verifylab.publish.chapter_reads import track; track({where})"
            kernel_arguments.append(f"--IPKernelApp.exec_lines={track}")
        to_notebook(source, src_nb)
        begun = inputs.begin() if inputs is not None else None  # what the chapter can read, fixed before it runs
        try:
            papermill.execute_notebook(
                str(src_nb),
                str(out_nb),
                parameters=parameters,
                cwd=str(cwd),
                kernel_name="python3",
                progress_bar=False,
                log_output=False,
                # papermill writes the whole notebook after every cell unless told not to; this copy lives in a
                # temporary folder until the chapter ends (it is written then, or on an error), so those writes
                # were work for nothing: about 1 CPU-s of the 1.1 the parent spent on chapter 04
                request_save_on_cell_execute=False,
                engine_name=ENGINE,
                on_cell=cell_done,
                on_cell_start=stop.before_cell,  # a second Ctrl-C interrupts this kernel while a cell runs
                extra_arguments=kernel_arguments,
                kernel_manager_class=IpcKernelManager,  # no TCP port another process could take first
            )
        except interrupt.ChapterInterrupted as exc:
            discard_pages(output)
            return ChapterResult(source.stem, output, ok=False, error=str(exc), interrupted=True)
        except (DeadKernelError, RuntimeError) as exc:  # the kernel died (a crash, a kill, or before its first cell)
            if isinstance(exc, RuntimeError) and "kernel" not in str(exc).lower():
                raise
            discard_pages(output)
            error, log = kernel_death(exc, secret_values(parameters))
            return ChapterResult(source.stem, output, ok=False, error=error, kernel_log=log)
        except papermill.PapermillExecutionError as exc:
            if stop.requested.is_set() and exc.ename == "KeyboardInterrupt":
                discard_pages(output)
                return ChapterResult(
                    source.stem, output, ok=False, error="interrupted (Ctrl-C) in a cell", interrupted=True
                )
            secrets = secret_values(parameters)
            last_line = (exc.evalue or str(exc)).strip().splitlines()[-1:] or [str(exc)]
            discard_pages(output)
            if out_nb.exists():
                write_without_secrets(out_nb, output.with_suffix(".failed.ipynb"), secrets)
            error = printable(f"{exc.ename}: {last_line[0]}", secrets)
            return ChapterResult(source.stem, output, ok=False, error=error)
        reads = read_log(reads_log) if begun is not None else None
        digest, parts = begun.record(reads) if begun is not None and reads is not None else (None, None)
        write_without_secrets(out_nb, output, secret_values(parameters), digest, reads, parts, as_pages=True)
    return ChapterResult(source.stem, output, ok=True)


def kernel_death(exc: Exception, secrets: set[str]) -> tuple[str, str]:
    """A chapter's error when its kernel died (what the client saw, one line) and the end of the kernel's own log
    (a crash's message is printed there, not in a cell's output), credentials removed from both."""
    from verifylab.publish.ipc_kernel import last_kernel_log

    said = str(exc).strip().splitlines()[:1] or [""]
    log = last_kernel_log()
    error = f"the kernel died ({type(exc).__name__}: {said[0]})" + ("" if log else "; it logged nothing")
    return printable(error, secrets), printable(log, secrets)


def printable(text: str, secrets: set[str]) -> str:
    """Text a chapter's process wrote, safe to print and to keep: the chapter's own secret values scrubbed, every
    credential the detector finds redacted (a log holds more than the parameters), terminal control sequences
    (clipboard writes, line erasure, titles) stripped."""
    return redact_text(strip_terminal_codes(scrub(text, secrets)))


def write_without_secrets(
    executed: Path,
    target: Path,
    secrets: set[str],
    inputs: str | None = None,
    reads: Reads | None = None,
    parts: dict[str, str] | None = None,
    as_pages: bool = False,
) -> None:
    """Write an executed notebook where the book takes it, with the credentials its parameters carried (an
    ``--api-key`` in a live chapter's launch flags) replaced in every string: the injected parameters cell,
    papermill's record of the parameters, and the outputs. The kernel had the real values; the book never does.
    ``inputs``: the digest of what it was made from, recorded in its metadata with ``reads``, what it read;
    ``as_pages``: written as the chapter's pages (:mod:`publish.pages`), not as one file."""
    notebook = json.loads(executed.read_text(encoding="utf-8"))
    if inputs is not None:
        record: dict[str, Any] = {"inputs": inputs}
        if reads is not None:
            record["reads"] = reads.as_json()
        if parts is not None:
            record["parts"] = parts
        notebook.setdefault("metadata", {})[METADATA_KEY] = record
    if as_pages:
        write_pages(scrub(notebook, secrets), target)
    else:
        atomic_write_text(target, json.dumps(scrub(notebook, secrets), indent=1, ensure_ascii=False) + "\n")


REPLAY_WORKERS = min(2, os.cpu_count() or 1)  # replayed chapters only read data: two run at once


def execute_chapters(
    root: Path,
    jobs: list[tuple[Path, dict[str, Any]]],
    on_chapter: Callable[[str, int, int], None] | None = None,
    on_cell: CellProgress | None = None,
    workers: int = 1,
    inputs: dict[str, ChapterInputs] | None = None,
    stop_at_failure: bool = False,
) -> list[ChapterResult]:
    """Execute (chapter, parameters) jobs: in order, or up to ``workers`` at a time (replay: the chapters are
    independent); results in chapter order. ``inputs``: each chapter's inputs digest by name, to record;
    ``stop_at_failure``: once a chapter fails no other starts (those running finish), each left one says why."""
    failed: list[str] = []

    def run(number: int, source: Path, params: dict[str, Any]) -> ChapterResult:
        output = root / GENERATED / f"{source.stem}.ipynb"
        if interrupt.CURRENT.requested.is_set():
            return ChapterResult(source.stem, output, ok=False, error="not run: Ctrl-C came first", interrupted=True)
        if failed:
            return ChapterResult(source.stem, output, ok=False, error=f"not run: chapter {failed[0]} failed first")
        if on_chapter:
            on_chapter(source.stem, number, len(jobs))
        result = execute_chapter(source, output, params, root, on_cell, (inputs or {}).get(source.stem))
        if stop_at_failure and not result.ok:
            failed.append(source.stem)
        return result

    if workers <= 1:
        return [run(number, source, params) for number, (source, params) in enumerate(jobs, start=1)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run, n, source, params) for n, (source, params) in enumerate(jobs, start=1)]
        return [future.result() for future in futures]


class BookInterrupted(VerifylabError):
    """Ctrl-C stopped a book build before it rendered: ``chapters`` says which were executed and kept."""

    def __init__(self, chapters: list[ChapterResult]) -> None:
        super().__init__("interrupted (Ctrl-C): nothing rendered")
        self.chapters = chapters


def run_parameters(mode: str, data_dir: str, run_id: str | None, values: dict[str, Any]) -> dict[str, Any]:
    """What every chapter of a build is given before its own overrides, each then taking those it declares
    (``parameters_for``): one rule for `verifylab run` and `verifylab book`, so a chapter one executed with the same
    values the other reuses instead of executing it again."""
    return {"mode": mode, "data_dir": data_dir, "run_id": run_id, **values}


def build_book(
    root: Path,
    parameters: dict[str, Any] | None = None,
    on_chapter: Callable[[str, int, int], None] | None = None,
    on_cell: CellProgress | None = None,
    force: bool = False,
) -> BookResult:
    """Execute the chapters whose inputs changed (:func:`execute_stale_chapters`), render the HTML book and print
    its pages to PDF; the first failing chapter stops it (``verifylab run`` instead renders failed chapters and
    goes on)."""
    params = run_parameters("replay", "data", None, parameters or {})
    jobs = [(source, parameters_for(source.stem, params)) for source in chapter_sources(root)]
    chapters = execute_stale_chapters(root, jobs, on_chapter, on_cell, force, stop_at_failure=True)
    result = BookResult(chapters=chapters)
    if any(chapter.interrupted for chapter in result.chapters):
        raise BookInterrupted(result.chapters)  # nothing rendered: the build before stays as it was
    failed = next((c for c in result.chapters if not c.ok), None)
    if failed:
        log = f"\nthe end of the kernel's log:\n{failed.kernel_log}" if failed.kernel_log else ""
        raise BookBuildError(f"chapter {failed.name} failed: {failed.error}{log}")
    data_dir = root / params["data_dir"]
    inputs_now = render_inputs(root, data_dir, [c.name for c in result.chapters])
    before = last_render(root)
    changed = changed_inputs(before["inputs"] if before else None, inputs_now)
    if before is not None and not changed and not force:  # nothing it is made from changed: keep what was rendered
        edition = json.loads((root / GENERATED / "edition.json").read_text(encoding="utf-8"))
        result.edition = edition | {"key_findings": [Finding.model_validate(f) for f in edition["key_findings"]]}
        result.index_html = root / "_build" / "html" / "index.html"
        result.edition_dir = Path(before["edition_dir"])
        result.pdfs, result.pdf_note = [Path(p) for p in before["pdfs"]], str(before["pdf_note"])
        return result
    result = publish_book(root, data_dir, result)
    result.rendered = changed
    assert result.edition_dir is not None  # publish_book archives the edition
    record_render(root, inputs_now, result.edition_dir, result.pdfs, result.pdf_note)
    return result


def execute_stale_chapters(
    root: Path,
    jobs: list[tuple[Path, dict[str, Any]]],
    on_chapter: Callable[[str, int, int], None] | None = None,
    on_cell: CellProgress | None = None,
    force: bool = False,
    stop_at_failure: bool = False,
) -> list[ChapterResult]:
    """Execute each (chapter, parameters) job whose executed copy was not made from its current inputs (every one
    with ``force``, or in live mode); the others are kept and marked ``reused``. Each executed copy records what it
    was made from. Results in chapter order; ``stop_at_failure``: as :func:`execute_chapters`."""
    inputs = chapter_inputs(root, jobs)

    def stale(source: Path, params: dict[str, Any]) -> bool:
        if force or params.get("mode", "replay") != "replay":
            return True
        return not inputs[source.stem].unchanged(root / GENERATED / f"{source.stem}.ipynb")

    to_execute = [job for job in jobs if stale(*job)]
    why = {
        source.stem: ["asked (--force)"]
        if force
        else inputs[source.stem].changed(root / GENERATED / f"{source.stem}.ipynb")
        for source, params in to_execute
        if params.get("mode", "replay") == "replay"
    }
    replay = all(params.get("mode", "replay") == "replay" for _, params in jobs)
    workers = REPLAY_WORKERS if replay else 1  # live chapters run in order: 02 feeds 03
    done = execute_chapters(root, to_execute, on_chapter, on_cell, workers, inputs, stop_at_failure)
    for chapter in done:
        chapter.changed = why.get(chapter.name, [])
    executed = {c.name: c for c in done}
    return [
        executed.get(source.stem)
        or ChapterResult(source.stem, root / GENERATED / f"{source.stem}.ipynb", ok=True, reused=True)
        for source, _ in jobs
    ]


def chapter_inputs(root: Path, jobs: list[tuple[Path, dict[str, Any]]]) -> dict[str, ChapterInputs]:
    """Each chapter's inputs but its reads (:class:`ChapterInputs`): code and toolchain digested once for all, each
    data folder walked once (a file that is not a regular one is refused here, before any chapter runs)."""
    code, toolchain = code_digest(), toolchain_versions()
    folders = {str(p.get("data_dir", "data")) for _, p in jobs}
    names = {d: [f.relative_to(root / d).as_posix() for f in data_files(root / d)] for d in folders}
    return {
        s.stem: ChapterInputs(
            s, p, code, toolchain, root / str(p.get("data_dir", "data")), names[str(p.get("data_dir", "data"))]
        )
        for s, p in jobs
    }


def publish_book(root: Path, data_dir: Path, result: BookResult) -> BookResult:
    """The edition of the executed chapters in ``root`` (:func:`render_edition`) with its pages printed to PDF."""
    result = render_edition(root, data_dir, result)
    assert result.edition_dir is not None  # render_edition archives the edition
    result.pdfs, result.pdf_note = print_pdfs(
        root / "_build" / "html", result.edition_dir / EXPORTS / "pdf", ["decision", *book_pages(root)]
    )
    return result


def render_edition(root: Path, data_dir: Path, result: BookResult) -> BookResult:
    """After the chapters ran: generated pages (decision, changes, edition stamp), HTML, archived edition.
    Warnings are errors unless a chapter failed (its page then carries the error)."""
    ev = Evidence(data_dir)
    result.edition = write_generated_pages(root, ev)
    result.index_html = render_html(root, strict=not result.failed)
    result.edition_dir = archive(root, result.edition)
    return result
