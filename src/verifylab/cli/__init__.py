"""The ``verifylab`` command line: a thin shell over library calls (typer + rich), one module per command
group; ``_shared`` holds the consoles, the one error exit and the progress bar."""

from __future__ import annotations

import inspect
import re
from typing import Any

import typer
import typer.core


def _flags_without_a_type(option: typer.core.TyperOption, ctx: Any) -> str | None:
    """A flag takes no value: its help row shows none (typer's rich help prints ``<bool>`` for every flag)."""
    return None if option.is_flag else _typed(option, ctx)


_typed = typer.core.TyperOption.display_type_rich
setattr(typer.core.TyperOption, "display_type_rich", _flags_without_a_type)  # noqa: B010 (mypy: a method replaced)

app = typer.Typer(
    help="Evidence for SGLang tensor-parallel speculative decoding on PCIe GPUs.\n\n"
    "On the GPU box, first: `verifylab box` (the decision for that box). Then `verifylab env`, "
    "`verifylab gates audit|apply|verify`, `verifylab serve VARIANT`, "
    "`verifylab bench|sweep --url URL`, `verifylab trace summarize DIR`, or all of it at once with "
    "`verifylab run --params params.yaml`. Anywhere: `verifylab model whatif|reconcile`, `verifylab runs list`, "
    "`verifylab book` (renders the book from data/).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

from verifylab.cli import bench, book, box, comm, fleet, gates, model, trace  # noqa: E402  (the modules register their commands)

app.command()(book.env)
app.add_typer(book.runs_app, name="runs")
app.command()(book.book)
app.command()(book.notebook)
app.command()(book.exhibit)
app.command("run")(book.run_cmd)
app.add_typer(trace.trace_app, name="trace")
app.command("synth-verify")(trace.synth_verify)
app.add_typer(model.model_app, name="model")
app.add_typer(gates.gates_app, name="gates")
app.add_typer(comm.comm_app, name="comm")
app.add_typer(fleet.fleet_app, name="fleet")
app.command()(bench.bench)
app.command()(bench.sweep)
app.command("serve")(bench.serve_cmd)
app.command("box")(box.box_cmd)


ROW_CHARS = 220  # a row longer than this is cut at its first clause (about two lines at 100 columns)


def first_sentence(help_text: str) -> str:
    """A command's row in its group's list: the first sentence of its help on one line (typer's rich help kept
    the docstring's line breaks, so a row broke mid-sentence), cut before its first top-level ``:`` or ``;`` when
    longer than :data:`ROW_CHARS` (what follows them details the first clause)."""
    paragraph = " ".join(inspect.cleandoc(help_text).split("\n\n")[0].split())
    sentence = re.split(r"(?<=[.!?])\s+(?=[A-Z`])", paragraph, maxsplit=1)[0]
    if len(sentence) <= ROW_CHARS:
        return sentence
    depth, quoted = 0, False
    for i, char in enumerate(sentence):
        quoted ^= char == "`"
        depth += (char == "(") - (char == ")") if not quoted else 0
        if char in ":;" and depth == 0 and not quoted:
            return sentence[:i] + "."
    return sentence


def prose_lines(help_text: str) -> str:
    """A command's help with each prose paragraph on one line (typer's rich help keeps a docstring's line breaks
    past the first paragraph, so they broke mid-sentence at any width); a block with an indented line (an example
    command, YAML) and a list of backquoted commands keep their lines, and a line opening with ``Example`` starts
    its own."""
    paragraphs = []
    for paragraph in inspect.cleandoc(help_text).split("\n\n"):
        first, *rest = paragraph.split("\n")
        kept = any(line[:1].isspace() for line in rest) or all(line.startswith("`") for line in (first, *rest))
        if paragraph.startswith("\b") or kept:
            paragraphs.append(paragraph)
            continue
        paragraphs.append(first + "".join(("\n" if line.startswith("Example") else " ") + line for line in rest))
    return "\n\n".join(paragraphs)


def _one_line_rows(group: typer.Typer) -> None:
    """Each command's row in its group's list on one line, and its help's prose paragraphs each on one line."""
    for command in group.registered_commands:
        text = command.help or inspect.getdoc(command.callback) or ""
        if command.short_help is None:
            command.short_help = first_sentence(text)
        command.help = prose_lines(text)
    for sub in group.registered_groups:
        if sub.typer_instance is None:
            continue
        text = next((h for h in (sub.help, sub.typer_instance.info.help) if isinstance(h, str)), "")
        if not isinstance(sub.short_help, str) and text:  # unset: typer's defaults are placeholders, not None
            sub.short_help = first_sentence(text)
        if isinstance(sub.typer_instance.info.help, str):
            sub.typer_instance.info.help = prose_lines(sub.typer_instance.info.help)
        _one_line_rows(sub.typer_instance)


_one_line_rows(app)


def main() -> None:  # pragma: no cover - console entry point alias
    app()
