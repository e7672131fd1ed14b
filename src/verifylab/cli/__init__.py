"""The ``verifylab`` command line: a thin shell over library calls (typer + rich), one module per command
group; ``_shared`` holds the consoles, the one error exit and the progress bar."""

from __future__ import annotations

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


def main() -> None:  # pragma: no cover - console entry point alias
    app()
