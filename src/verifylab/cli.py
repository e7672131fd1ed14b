"""The ``verifylab`` command line: a thin shell over library calls (typer + rich)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from verifylab.errors import VerifylabError

app = typer.Typer(
    help="Evidence for SGLang tensor-parallel speculative decoding on PCIe GPUs.\n\n"
    "Typical use: `verifylab env` on the GPU box, `verifylab runs list` to see stored measurements, "
    "`verifylab book` to render the book from data/ (replay mode).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
runs_app = typer.Typer(
    help="The run store (data/runs): list and inspect measured runs.", no_args_is_help=True
)
app.add_typer(runs_app, name="runs")

console = Console()
err_console = Console(stderr=True)


def fail(exc: VerifylabError) -> typer.Exit:
    """Print a library error as one line and return the exit to raise."""
    err_console.print(f"[bold red]error:[/] {exc}", soft_wrap=True, highlight=False, markup=True)
    return typer.Exit(code=2)


def print_frame(frame, title: str | None = None) -> None:
    """Render a DataFrame as a rich table."""
    table = Table(title=title, show_lines=False)
    for column in frame.columns:
        table.add_column(str(column), overflow="fold")
    for row in frame.itertuples(index=False):
        table.add_row(*["" if v is None else str(v) for v in row])
    console.print(table)


@app.command()
def env(
    as_json: bool = typer.Option(False, "--json", help="Print the manifest fields as JSON."),
    no_torch: bool = typer.Option(False, "--no-torch", help="Do not import torch (faster; no NCCL version)."),
) -> None:
    """Describe this machine as a run manifest would: GPUs, arch, interconnect, driver, CUDA, versions.

    Secrets are redacted (any variable whose name contains TOKEN, KEY, SECRET or PASSWORD).
    Example: `verifylab env --json > host.json`
    """
    from verifylab.env import capture_host

    info = capture_host(with_torch=not no_torch)
    if as_json:
        typer.echo(json.dumps(info.model_dump(mode="json"), indent=2, sort_keys=True))
        return
    table = Table(title="this host", show_header=False)
    for key, value in info.model_dump(exclude={"environment", "topology"}).items():
        table.add_row(key, json.dumps(value) if isinstance(value, dict | list) else str(value))
    console.print(table)
    if info.gpu_count == 0:
        console.print("[yellow]No GPU visible: live mode is not possible here; replay mode works.[/]")


@runs_app.command("list")
def runs_list(
    data_dir: Path = typer.Option(Path("data"), help="Folder holding runs/ and reference/."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """List the measured runs stored under DATA_DIR/runs, with their hardware label.

    Example: `verifylab runs list --data-dir data`
    """
    from verifylab.runs import RunStore

    try:
        frame = RunStore(data_dir / "runs").summary()
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(frame.to_json(orient="records", indent=2))
    elif frame.empty:
        console.print(f"no runs stored under {data_dir / 'runs'}")
    else:
        print_frame(frame, title=f"runs in {data_dir / 'runs'}")


@runs_app.command("show")
def runs_show(
    run_id: str = typer.Argument(..., help="Run id (a folder under DATA_DIR/runs)."),
    data_dir: Path = typer.Option(Path("data"), help="Folder holding runs/."),
) -> None:
    """Print one run's manifest (validated). Example: `verifylab runs show 20261129-h200-compute`"""
    from verifylab.runs import RunStore

    try:
        manifest = RunStore(data_dir / "runs").manifest(run_id)
    except VerifylabError as exc:
        raise fail(exc) from None
    typer.echo(manifest.model_dump_json(indent=2))


@app.command()
def book(
    root: Path = typer.Option(Path("."), help="Project root (holds _config.yml and notebooks/)."),
) -> None:
    """Execute every chapter in replay mode with papermill and render the HTML book (_build/html).

    This is `make book`'s build step. Example: `verifylab book`
    """
    from rich.progress import BarColumn, Progress, TextColumn

    from verifylab.book import build_book, project_root

    try:
        project = project_root(root)
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            console=console,
            transient=False,
        ) as progress:
            task = progress.add_task("chapters", total=None)

            def on_chapter(name: str, number: int, total: int) -> None:
                progress.update(task, description=f"executing {name}", completed=number - 1, total=total)

            result = build_book(project, on_chapter=on_chapter)
            progress.update(task, description="rendered", completed=len(result.chapters))
    except VerifylabError as exc:
        raise fail(exc) from None
    console.print(f"book: [bold]{result.index_html}[/]")


def main() -> None:  # pragma: no cover - console entry point alias
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
