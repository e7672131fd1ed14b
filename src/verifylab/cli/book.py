"""``verifylab env``, ``runs list|show``, ``book``, ``notebook`` and ``run``: the box, the run store, the book."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from verifylab.cli._shared import MISSING, ChapterProgress, console, err_console, fail, print_frame, table_cell
from verifylab.errors import ParameterError, VerifylabError
from verifylab.intake import require_evidence_folder
from verifylab.vocab import plain_run_id

runs_app = typer.Typer(help="The run store (data/runs): list and inspect measured runs.", no_args_is_help=True)


def env(
    as_json: bool = typer.Option(False, "--json", help="Print the manifest fields as JSON."),
    no_torch: bool = typer.Option(False, "--no-torch", help="Do not import torch (faster; no NCCL version)."),
) -> None:
    """Describe this machine as a run manifest would: GPUs, arch, interconnect, driver, CUDA, versions.

    Of the environment only the variables that matter to a measurement are shown (CUDA_, NCCL_, TORCH_, SGLANG_,
    FLASHINFER_, VERIFYLAB_ ...), with anything that looks like a credential redacted.
    Example: `verifylab env --json > host.json`
    """
    from verifylab.host import capture_host

    info = capture_host(with_torch=not no_torch)
    if as_json:
        typer.echo(json.dumps(info.model_dump(mode="json"), indent=2, sort_keys=True))
        return
    table = Table(title="this host", show_header=False)
    for key, value in info.model_dump(exclude={"environment", "topology"}).items():
        table.add_row(key, _host_value(value))
    console.print(table)
    if info.gpu_count == 0:
        console.print("[yellow]No GPU visible: live mode is not possible here; replay mode works.[/]", markup=True)


def _host_value(value: object) -> str:
    """A field of ``env``'s table as a reader reads it: what this host does not have is a dash (not Python's None or
    JSON's null), a package table its names and versions, a list its items."""
    if isinstance(value, dict):
        return "; ".join(f"{name} {_host_value(v)}" for name, v in value.items())
    if isinstance(value, list):
        return "; ".join(_host_value(v) for v in value) or MISSING
    return table_cell(value)


@runs_app.command("list")
def runs_list(
    data_dir: Path = typer.Option(Path("data"), help="Folder holding runs/ and reference/."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
    wide: bool = typer.Option(False, "--wide", help="Every column (label, GPU, SM, interconnect, tables)."),
) -> None:
    """List the measured runs stored under DATA_DIR/runs: id, status and date (fits 80 columns, ids whole);
    `--wide` adds the hardware label, GPU, interconnect and tables.

    Example: `verifylab runs list --data-dir data`, then `verifylab runs show RUN_ID`
    """
    from verifylab.store.runs import RunStore

    try:
        require_evidence_folder(data_dir, holding=())  # a typo in --data-dir is not an empty store
        frame = RunStore(data_dir / "runs").summary()
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(frame.to_json(orient="records", indent=2))
    elif frame.empty:
        console.print(f"no runs stored under {data_dir / 'runs'}")
    elif wide:
        print_frame(frame, title=f"runs in {data_dir / 'runs'}")
    else:
        print_narrow_runs(frame, f"runs in {data_dir / 'runs'} (--wide: every column)")
    bad = frame[frame["status"].astype(str).str.startswith("unreadable")] if not frame.empty else frame
    if not bad.empty:  # the others are listed above; the exit code says something is wrong
        reasons = "; ".join(s.removeprefix("unreadable: ") for s in bad["status"])
        raise fail(VerifylabError(f"{len(bad)} run(s) with an unreadable manifest: {reasons}"))


def print_narrow_runs(frame, title: str) -> None:
    """The run list in 80 columns: each id on one line (what a reader copies), its status and date."""
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    table.add_column("run_id", no_wrap=True)
    table.add_column("status", overflow="fold")
    table.add_column("created", no_wrap=True)
    for row in frame.itertuples(index=False):
        table.add_row(str(row.run_id), str(row.status), str(row.created or "")[:10])
    console.print(table)


@runs_app.command("show")
def runs_show(
    run_id: str = typer.Argument(..., help="Run id (a folder under DATA_DIR/runs)."),
    data_dir: Path = typer.Option(Path("data"), help="Folder holding runs/."),
) -> None:
    """Print one run's manifest (validated). Example: `verifylab runs show 20261202-203301-box-probe`"""
    from verifylab.store.runs import RunStore

    try:
        plain_run_id(run_id)  # an id that is a path is refused before any folder is looked at
        require_evidence_folder(data_dir, holding=())
        manifest = RunStore(data_dir / "runs").manifest(run_id)
    except VerifylabError as exc:
        raise fail(exc) from None
    typer.echo(manifest.model_dump_json(indent=2))


@runs_app.command("migrate")
def runs_migrate(
    data_dir: Path = typer.Option(Path("data"), help="Folder holding runs/."),
) -> None:
    """Rewrite runs stored by an older verifylab under the current table schema (each changed table atomically,
    then its manifest); runs already current are left as they are. Reading never needs this: old runs are read
    through the same migration. Example: `verifylab runs migrate --data-dir data`
    """
    from verifylab.store.runs import RunStore
    from verifylab.store.schema import SCHEMA_VERSION

    try:
        require_evidence_folder(data_dir, holding=())
        store = RunStore(data_dir / "runs")
        migrated = [run_id for run_id in store.run_ids() if store.migrate(run_id)]
    except VerifylabError as exc:
        raise fail(exc) from None
    console.print(f"{len(migrated)} run(s) migrated to schema {SCHEMA_VERSION}: {', '.join(migrated) or 'none'}")


def book(
    root: Path = typer.Option(Path("."), help="Project root (holds _config.yml and notebooks/)."),
    publish: bool = typer.Option(False, "--publish", help="Register this edition in the committed book/editions.json."),
    force: bool = typer.Option(False, "--force", help="Execute every chapter, even those whose inputs are unchanged."),
) -> None:
    """Execute the chapters in replay mode with papermill and render the HTML book (_build/html).

    A chapter is executed again only when one of its inputs changed since its executed copy in book/_generated
    was made: its notebook, its parameters, verifylab's code, what it read of the data folder (the files its kernel
    opened, the folders it listed) or the rendering toolchain; the
    build says which chapters it executed and which it kept. This is `make book`'s build step.
    Example: `verifylab book` (or `verifylab book --force` to execute all)
    """
    from verifylab.publish.build import BookInterrupted, build_book, project_root
    from verifylab.publish.interrupt import stop_on_ctrl_c

    try:
        project = project_root(root)
        _warn_of_toolchain(project)
        with ChapterProgress("executing") as progress:
            with stop_on_ctrl_c():  # Ctrl-C: stop after the cells in progress; again: interrupt them
                result = build_book(project, on_chapter=progress.on_chapter, on_cell=progress.on_cell, force=force)
            progress.finish("rendered", len(result.chapters))
        if publish:
            from verifylab.publish.registry import publish as publish_edition

            publish_edition(project, result.edition)
    except BookInterrupted as stopped:
        done = ", ".join(c.name for c in stopped.chapters if c.ok) or "none"
        _stopped(
            f"nothing rendered (the book built before is as it was); executed and kept: {done} — "
            "`verifylab book` executes the rest"
        )
    except VerifylabError as exc:
        raise fail(exc) from None
    assert result.edition_dir is not None  # build_book archives the edition or raises
    executed = [f"{c.name} ({', '.join(c.changed)})" if c.changed else c.name for c in result.chapters if not c.reused]
    kept = [c.name for c in result.chapters if c.reused]
    console.print(f"executed: {'; '.join(executed) or 'none'}", highlight=False, markup=False)
    if kept:
        console.print(f"unchanged inputs, kept as executed before: {', '.join(kept)}", highlight=False)
    if result.rendered:
        console.print(f"rendered: {', '.join(result.rendered)}", highlight=False, markup=False)
    else:
        console.print("rendered: nothing (no input of the pages changed; HTML, charts, exports and PDFs kept)")
    console.print(f"edition {result.edition['id']} (all editions: {result.edition_dir.parent / 'index.html'})")
    console.print(f"PDFs: {result.pdf_note}", highlight=False)
    if publish:
        console.print("registered in book/editions.json: commit it so the edition outlives the build folder")
    console.print(f"book: [bold]{escape(str(result.index_html))}[/]", markup=True)


def _stopped(words: str) -> NoReturn:
    """Ctrl-C ended a build or a run: say what it left, exit 130 (as a shell reports an interrupted command)."""
    console.print(f"stopped: {words}", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(code=130)


def _warn_of_toolchain(project: Path) -> None:
    """Say which rendering packages differ from the newest registered edition's: its pages may then differ."""
    from verifylab.publish.registry import load_registry
    from verifylab.publish.toolchain import toolchain_differences, toolchain_versions

    for line in toolchain_differences(load_registry(project), toolchain_versions()):
        err_console.print(f"warning: {line}: pages may differ from that edition's", highlight=False, markup=False)


def notebook(
    chapter: str = typer.Argument(..., help="The chapter: its number (02) or its name (02_benchmarks)."),
    out: Path = typer.Argument(..., help="The .ipynb to write (replaced whole)."),
    root: Path = typer.Option(Path("."), help="Project root (holds notebooks/)."),
) -> None:
    """Write a chapter as the notebook papermill runs: its parameters cell written from the chapter's Params.

    The committed notebooks/*.py only point to their Params (src/verifylab/chapters/params.py), the one place a
    parameter is declared; this writes the names, defaults and what each does into the cell papermill reads.
    Example: `verifylab notebook 02 /tmp/02.ipynb && papermill /tmp/02.ipynb /tmp/02.out.ipynb -p mode live
    -p label "8x RTX PRO 6000, PCIe" -p model_path /models/kimi`
    """
    from verifylab.chapters.registry import chapter_named
    from verifylab.intake import refuse_write_into_data
    from verifylab.publish.build import project_root, to_notebook

    try:
        project = project_root(root)
        source = chapter_named(chapter).notebook(project)
        if out.suffix != ".ipynb":
            raise ParameterError(f"{out}: the notebook papermill runs must end in .ipynb")
        refuse_write_into_data(out, "OUT", project / "data", (source,), file=f"{source.stem}.ipynb")
        to_notebook(source, out)
    except VerifylabError as exc:
        raise fail(exc) from None
    console.print(f"{source.stem} -> {out} (parameters from its Params)", highlight=False)


def run_cmd(
    params: Path = typer.Option(..., "--params", help="params.yaml (see examples/params-*.yaml)."),
    root: Path = typer.Option(Path("."), help="Project root."),
    only: str = typer.Option("", help="Run only these chapters, e.g. '01,02' (a campaign split over calls)."),
    render: bool = typer.Option(True, help="Render the edition afterwards (--no-render: chapters only)."),
) -> None:
    """Run chapters 00-05 in order with papermill (live mode on the GPU box, or replay), store each chapter's
    data as it completes, and render the edition. A failing chapter is reported with its error and rendered
    as such; later chapters run on what exists. Exit 1 when a chapter failed (the book is still rendered).
    With --only, the render completes the book: a chapter never executed in this project is replayed from the
    data folder (and says so). In replay mode a chapter whose inputs are unchanged since it was executed is kept,
    as `verifylab book` keeps it.

    Example: `verifylab run --params examples/params-smoke.yaml`
    """
    from verifylab.publish.build import project_root
    from verifylab.publish.interrupt import stop_on_ctrl_c
    from verifylab.publish.pipeline import RunInterrupted, load_params, run_pipeline

    try:
        project = project_root(root)
        parameters = load_params(params)
        with ChapterProgress(f"{parameters.mode}:", elapsed=True) as progress:
            chapters = only.split(",") if only else None
            with stop_on_ctrl_c():
                result = run_pipeline(
                    project, parameters, progress.on_chapter, progress.on_cell, only=chapters, render=render
                )
            progress.finish("rendered" if render else "done", len(result.chapters))
    except RunInterrupted as stopped:
        for chapter in stopped.chapters:
            mark = "[green]ok[/]" if chapter.ok else f"[yellow]{escape(str(chapter.error))}[/]"
            console.print(f"{escape(chapter.name)}: {mark}", highlight=False, soft_wrap=True, markup=True)
        _stopped(f"nothing rendered. Resume with: verifylab run --params {params} --only {','.join(stopped.to_resume)}")
    except VerifylabError as exc:
        raise fail(exc) from None
    for chapter in result.chapters:
        mark = "[green]ok[/]" if chapter.ok else f"[red]failed[/]: {escape(str(chapter.error))}"
        how = f" (replayed from {parameters.data_dir}/: never executed in this project)" if chapter.replayed else ""
        how = " (kept: its inputs are those it was executed from)" if chapter.reused else how
        console.print(
            f"{escape(chapter.name)}: {mark}{escape(how)}", highlight=False, soft_wrap=True, markup=True
        )  # one line
        if chapter.kernel_log:  # its kernel died: what the kernel process itself printed last
            console.print(
                f"[dim]the end of its kernel's log:\n{escape(chapter.kernel_log)}[/]", highlight=False, markup=True
            )
    if render:
        console.print(f"edition {result.edition['id']}; book: [bold]{escape(str(result.index_html))}[/]", markup=True)
    if result.failed:
        raise typer.Exit(code=1)


def exhibit(
    name: str = typer.Argument(
        "", help="The exhibit's name, as its caption's Reproduce line gives it (tbl-public-speculation)."
    ),
    data_dir: Path = typer.Option(Path("data"), help="The evidence folder to build it from."),
    root: Path = typer.Option(Path("."), help="Project root (holds notebooks/)."),
    csv: Path | None = typer.Option(None, "--csv", help="A table: also write its cells here (the export's CSV)."),
    out: Path | None = typer.Option(None, help="A chart: where its SVG goes (default: NAME.svg)."),
    list_all: bool = typer.Option(False, "--list", help="List every exhibit: name, chapter, the call that makes it."),
    params: Path | None = typer.Option(
        None,
        "--params",
        help="The params.yaml the book was run with (its chapter's parameters; default: the defaults).",
    ),
) -> None:
    """Rebuild one numbered exhibit of the book from the data folder, alone: the call its chapter's notebook makes
    for it, with the chapter's default parameters or those of --params (replay). A table is printed (and written
    with --csv), a chart written as SVG, a finding printed. Each caption's Reproduce line names its exhibit.
    Example: `verifylab exhibit tbl-public-speculation --csv /tmp/curves.csv` (or `verifylab exhibit --list`)
    """
    from verifylab.chapters.exhibits import book_exhibits
    from verifylab.csv_cells import csv_text
    from verifylab.intake import refuse_write_into_data
    from verifylab.iorw import atomic_write_text
    from verifylab.publish.build import project_root
    from verifylab.report.charts import Figure
    from verifylab.report.tables import Table

    try:
        exhibits = book_exhibits(project_root(root))
        if list_all or not name:
            for known in exhibits.values():
                console.print(f"{known.name}  ({known.chapter}: {known.call})", highlight=False, markup=False)
            return
        if name not in exhibits:
            close = [n for n in exhibits if name in n] or sorted(exhibits)[:5]
            raise ParameterError(f"no exhibit named {name!r}; e.g. {', '.join(close)} (`verifylab exhibit --list`)")
        chosen = exhibits[name]
        given = None
        if params is not None:
            from verifylab.publish.pipeline import load_params

            run = load_params(params)
            given = {"run_id": run.run_id, **run.parameters, **run.chapters.get(chosen.chapter, {})}
            data_dir = Path(run.data_dir)
        built = chosen.build(data_dir, parameters=given)
    except VerifylabError as exc:
        raise fail(exc) from None
    svg = out or Path(f"{name}.svg")  # a chart's file
    try:  # before the table is printed: nothing half done
        if isinstance(built, Table) and csv is not None:
            refuse_write_into_data(csv, "--csv", data_dir, (params,) if params else (), file=f"{name}.csv")
        if isinstance(built, Figure):
            refuse_write_into_data(svg, "--out", data_dir, (params,) if params else (), file=f"{name}.svg")
    except VerifylabError as exc:
        raise fail(exc) from None
    try:
        if isinstance(built, Table):
            cells = built.cells()
            print_frame(cells, title=f"{name} ({exhibits[name].chapter})")
            if csv is not None:
                atomic_write_text(csv, csv_text(cells))
                console.print(f"cells: {csv}", highlight=False)
        elif isinstance(built, Figure):
            atomic_write_text(svg, built.to_svg())
            console.print(f"{name}: {svg} ({built.caption[:100]}...)", highlight=False)
        else:
            console.print(str(built), highlight=False, soft_wrap=True)
    except VerifylabError as exc:  # the disk full, the folder read-only: one line, nothing half written
        raise fail(exc) from None
