"""What every command group shares: the consoles, one error exit, a table printer, a progress bar, the options that
name the engine an answer is for."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from verifylab.errors import ModelInputError, ParameterError, VerifylabError
from verifylab.redact import redact_text

if TYPE_CHECKING:
    from verifylab.store.evidence import Evidence

ROOT_HELP = (
    "Folder holding sglang/ (site-packages or an unpacked wheel), maybe flashinfer/ too. "
    "Default: the sglang importable here."
)
# Text, never markup, unless a call asks for it (markup=True, its free text escaped): a label, a path or a
# server's line holding "[/x]" or "[bold]" prints as written
console = Console(markup=False) if sys.stdout.isatty() else Console(width=160, markup=False)  # pipes, CI: wide
err_console = Console(stderr=True, markup=False)


def gates_root(root: Path | None) -> Path:
    """The folder a gates command works on: the given one, else the sglang importable here."""
    from verifylab.gates import default_root

    return root if root is not None else default_root()


def evidence_at(data_dir: Path) -> Evidence:
    """The evidence an interactive command decides from (``--data-dir``; derived values kept on disk), its folder
    checked first: run outside the checkout, the default ``data`` is not there, and the command says what to give."""
    from verifylab.intake import require_evidence_folder
    from verifylab.store.evidence import Evidence

    require_evidence_folder(data_dir)
    return Evidence(data_dir, keep_derived=True)


def fail(exc: VerifylabError) -> typer.Exit:
    """Print a library error as one line and return the exit to raise: 2 for a wrong parameter or model input (a usage
    error, as click's own: `box` and `model` answer alike), 1 for everything that went wrong while working."""
    # the message is text, not markup: errors quote paths and logs like "[/src/gloo/...:78]"
    said = escape(redact_text(str(exc)))  # an error may quote a URL or a log line holding a credential
    err_console.print(f"[bold red]error:[/] {said}", soft_wrap=True, highlight=False, markup=True)
    return typer.Exit(code=2 if isinstance(exc, ParameterError | ModelInputError) else 1)


MISSING = "—"  # a cell with no value (None, NaN): as the book's tables show it


def table_cell(value: object) -> str:
    """One cell as a reader reads it: no value is :data:`MISSING` (not "None" or "nan"), a whole float its integer
    ("16", not "16.0"), anything else its text."""
    if (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or type(value).__name__ in ("NAType", "NaTType")
    ):
        return MISSING
    if isinstance(value, float) and value.is_integer():
        return f"{value:.0f}"
    return str(value)


def print_frame(frame, title: str | None = None) -> None:
    """Render a DataFrame as a rich table; its title, headers and cells are text, never markup (a gloo error's
    "[/src/gloo/...]" or a label's "[bold]" prints as written)."""
    table = Table(title=Text(title) if title is not None else None, show_lines=False)
    for column in frame.columns:
        table.add_column(Text(str(column)), overflow="fold")
    for row in frame.itertuples(index=False):
        table.add_row(*[Text(table_cell(v)) for v in row])
    console.print(table)


def progress_bar():
    """A transient rich progress bar on stderr (description, bar, n/total, elapsed)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )


@contextmanager
def bytes_progress(description: str) -> Iterator[Callable[[int, int], None]]:
    """A transient progress bar over bytes (read, total, speed, time left); yields ``advance(done, total)``."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    ) as progress:
        task = progress.add_task(description, total=None)
        yield lambda done, total: progress.update(task, completed=done, total=total)


class ChapterProgress:
    """One progress bar over a run of chapters: ``label chapter`` while one executes, its cell as it goes."""

    def __init__(self, label: str, elapsed: bool = False) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}")]
        self._progress = Progress(*columns, *([TimeElapsedColumn()] if elapsed else []), console=console)
        self._label, self._chapter = label, ""
        self._task = self._progress.add_task("chapters", total=None)

    def __enter__(self) -> ChapterProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(*exc)  # type: ignore[arg-type]

    def on_chapter(self, name: str, number: int, total: int) -> None:
        self._chapter = name
        self._progress.update(self._task, description=f"{self._label} {name}", completed=number - 1, total=total)

    def on_cell(self, done: int, cells: int) -> None:
        self._progress.update(self._task, description=f"{self._label} {self._chapter} (cell {done}/{cells})")

    def finish(self, words: str, chapters: int) -> None:
        self._progress.update(self._task, description=words, completed=chapters, total=chapters)


def engine_options(scope: str = "") -> dict[str, Any]:
    """The options that name the engine, attention backend, verify kernel and KV dtype an answer is for (``model
    speculation``, ``box --plan``), their help prefixed with ``scope`` (``"--plan: "``), by parameter name."""
    return {
        "engine": typer.Option(
            "sglang",
            help=f"{scope}sglang or vllm: the engine you serve with. A public matrix ran vLLM; for SGLang its verify "
            "is re-priced as SGLang's kernel runs it. vllm answers are the matrices' own prices (no launch line).",
        ),
        "attention_backend": typer.Option(
            None,
            help=f"{scope}SGLang's --attention-backend, triton or flashinfer (default: what SGLang picks for the "
            "model's shape on --gpu, chapter 1: triton for MLA on SM120). A launch line names it.",
        ),
        "verify_kernel": typer.Option(
            None,
            help=f"{scope}Triton's verify kernel: serial (SGLang's, the default) or split-kv (needs a patched "
            "SGLang: priced, never in a launch line).",
        ),
        "kv_cache_dtype": typer.Option(
            None, help=f"{scope}KV dtype: bf16, fp8, ... (default: the matching public matrix's, else bf16)."
        ),
    }
