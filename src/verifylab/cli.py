"""The ``verifylab`` command line: a thin shell over library calls (typer + rich)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from verifylab.errors import ParameterError, VerifylabError

app = typer.Typer(
    help="Evidence for SGLang tensor-parallel speculative decoding on PCIe GPUs.\n\n"
    "On the GPU box: `verifylab env`, `verifylab gates audit|apply|verify`, `verifylab serve VARIANT`, "
    "`verifylab bench|sweep --url URL`, `verifylab trace summarize DIR`, or all of it at once with "
    "`verifylab run --params params.yaml`. Anywhere: `verifylab model whatif|reconcile`, `verifylab runs list`, "
    "`verifylab book` (renders the book from data/).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
trace_app = typer.Typer(help="Profiler traces: per-step all-reduce counts, comm vs compute.", no_args_is_help=True)
model_app = typer.Typer(
    help="Cost model: what-ifs (fusion vs substitution vs elimination), reconciliation.", no_args_is_help=True
)
gates_app = typer.Typer(
    help="Architecture gates that keep FlashInfer all-reduce fusion off (e.g. on SM120): audit, apply, verify, "
    "revert, and a version matrix.",
    no_args_is_help=True,
)
runs_app = typer.Typer(help="The run store (data/runs): list and inspect measured runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
app.add_typer(trace_app, name="trace")
app.add_typer(model_app, name="model")
app.add_typer(gates_app, name="gates")
ROOT_HELP = (
    "Folder holding sglang/ (site-packages or an unpacked wheel), maybe flashinfer/ too. "
    "Default: the sglang importable here."
)


def _gates_root(root: Path | None) -> Path:
    from verifylab.gates import default_root

    return root if root is not None else default_root()


console = Console() if sys.stdout.isatty() else Console(width=160)  # pipes and CI: wide, no wrapping
err_console = Console(stderr=True)


def fail(exc: VerifylabError) -> typer.Exit:
    """Print a library error as one line and return the exit to raise: 2 for a wrong parameter (a usage error,
    as click's own), 1 for everything that went wrong while working."""
    # the message is text, not markup: errors quote paths and logs like "[/src/gloo/...:78]"
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True, highlight=False, markup=True)
    return typer.Exit(code=2 if isinstance(exc, ParameterError) else 1)


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
    publish: bool = typer.Option(False, "--publish", help="Register this edition in the committed book/editions.json."),
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
        if publish:
            from verifylab.edition import publish as publish_edition

            publish_edition(project, result.edition)
    except VerifylabError as exc:
        raise fail(exc) from None
    console.print(f"edition {result.edition['id']} (all editions: {result.edition_dir.parent / 'index.html'})")
    if publish:
        console.print("registered in book/editions.json: commit it so the edition outlives the build folder")
    console.print(f"book: [bold]{result.index_html}[/]")


@app.command("run")
def run_cmd(
    params: Path = typer.Option(..., "--params", help="params.yaml (see examples/params-*.yaml)."),
    root: Path = typer.Option(Path("."), help="Project root."),
    only: str = typer.Option("", help="Run only these chapters, e.g. '01,02' (a campaign split over calls)."),
    render: bool = typer.Option(True, help="Render the edition afterwards (--no-render: chapters only)."),
) -> None:
    """Run chapters 01-05 in order with papermill (live mode on the GPU box, or replay), store each chapter's
    data as it completes, and render the edition. A failing chapter is reported with its error and rendered
    as such; later chapters run on what exists. Exit 1 when a chapter failed (the book is still rendered).

    Example: `verifylab run --params examples/params-smoke.yaml`
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from verifylab.book import project_root
    from verifylab.pipeline import load_params, run_pipeline

    try:
        project = project_root(root)
        parameters = load_params(params)
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            task = progress.add_task("chapters", total=None)

            def on_chapter(name: str, number: int, total: int) -> None:
                progress.update(task, description=f"{parameters.mode}: {name}", completed=number - 1, total=total)

            chapters = only.split(",") if only else None
            result = run_pipeline(project, parameters, on_chapter, only=chapters, render=render)
            progress.update(task, description="rendered" if render else "done", completed=len(result.chapters))
    except VerifylabError as exc:
        raise fail(exc) from None
    for chapter in result.chapters:
        mark = "[green]ok[/]" if chapter.ok else f"[red]failed[/]: {chapter.error}"
        console.print(f"{chapter.name}: {mark}", highlight=False)
    if render:
        console.print(f"edition {result.edition['id']}; book: [bold]{result.index_html}[/]")
    if result.failed:
        raise typer.Exit(code=1)


@trace_app.command("summarize")
def trace_summarize(
    paths: list[Path] = typer.Argument(..., help="Trace files (.json/.json.gz, one per rank) or folders of them."),
    as_json: bool = typer.Option(False, "--json", help="Print {steps: [...], notes, files} as JSON."),
    step_marker: str | None = typer.Option(
        None,
        help="Regex of the range names that delimit steps (default: ProfilerStep#N, verify_step#N, ...). "
        "Without markers, CUDA-graph launches delimit steps (SGLang's profiler writes no markers).",
    ),
    message_bytes: int | None = typer.Option(
        None, help="Bytes per all-reduce when the trace records none (CUDA graphs): tokens x hidden x 2."
    ),
) -> None:
    """Per rank and step: all-reduces (by implementation), communication, compute, idle, exposed comm.

    A FlashInfer fused all-reduce+RMSNorm kernel counts as an all-reduce; a c10d op and the backend op
    under it count once; NCCL kernel-name suffixes (e.g. _RING_LL) are names, not proof of the protocol.

    Example: `verifylab trace summarize /tmp/sglang_profile/ --json`
    """
    from verifylab.trace import summarize_traces

    try:
        summary = summarize_traces(paths, step_marker=step_marker, message_bytes=message_bytes)
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps(summary.to_json(), indent=2))
        return
    cols = {
        "rank": "rank",
        "step": "step",
        "phase": "phase",
        "allreduce_count": "all-reduces",
        "allreduce_impls": "by impl",
        "comm_us": "comm µs",
        "compute_us": "compute µs",
        "idle_us": "idle µs",
        "exposed_comm_us": "exposed µs",
        "comm_wait_us": "wait µs",
    }
    frame = summary.steps[list(cols)].rename(columns=cols)
    for col in ["comm µs", "compute µs", "idle µs", "exposed µs", "wait µs"]:
        frame[col] = frame[col].map(lambda v: "" if v is None or v != v else f"{v:,.0f}")
    print_frame(frame, title=f"{len(summary.files)} trace file(s)")
    for note in summary.notes:
        console.print(f"[yellow]note:[/] {note}")


@app.command("synth-verify")
def synth_verify(
    backend: str = typer.Option("gloo", help="gloo (CPU), nccl (one GPU per rank) or none (one rank, no comm)."),
    comm: str = typer.Option(
        "allreduce",
        help="allreduce (the backend's: NCCL or gloo, then the norm), fused (FlashInfer's all-reduce + add + "
        "RMSNorm kernel as SGLang 0.5.17 calls it; nccl) or compute_only (no communication: the floor).",
    ),
    allreduces_per_layer: int = typer.Option(
        2, help="2 as SGLang runs a TP layer; 1 or 0 = what removing those all-reduces saves (norms kept)."
    ),
    norm: str = typer.Option(
        "auto", help="fused_kernel (one FlashInfer kernel, as SGLang), pytorch (several kernels) or auto."
    ),
    ranks: int = typer.Option(2, help="Processes, one per rank."),
    tp: int | None = typer.Option(None, help="Shard the model as TP=tp (default: ranks; 'none' may emulate)."),
    layers: int = typer.Option(61, help="Transformer layers (Kimi-K2: 61)."),
    hidden: int = typer.Option(7168, help="Hidden size; 7168 = Kimi-K2 shapes, anything else = a small model."),
    tokens: int = typer.Option(4, help="Tokens per verify pass (k)."),
    steps: int = typer.Option(3, help="Profiled steps."),
    context: int = typer.Option(2048, help="KV-cache tokens attended to."),
    timeout: float = typer.Option(300.0, help="Seconds a collective phase may take before every rank is ended."),
    profile_dir: Path = typer.Option(..., help="Folder that receives synth-TP-<rank>.trace.json.gz."),
    summarize: bool = typer.Option(True, help="Print the trace summary afterwards."),
    run_id: str | None = typer.Option(None, help="Also store the summary as a measured run with this id."),
    label: str = typer.Option("", help="Hardware label of the stored run (e.g. 'CPU gloo, 2 ranks')."),
    data_dir: Path = typer.Option(Path("data"), help="Folder holding runs/ (with --run-id)."),
) -> None:
    """Run a TP-sharded synthetic verify pass (2 all-reduces + add/RMSNorm per layer) and profile it.

    Example (CPU, seconds): `verifylab synth-verify --backend gloo --ranks 2 --layers 61 --hidden 64
    --tokens 4 --steps 2 --context 64 --profile-dir /tmp/synth`. On 2+ GPUs compare `--backend nccl` with
    `--comm fused`, `--comm compute_only` and `--allreduces-per-layer 1`.
    """
    from pydantic import ValidationError

    from verifylab.params import describe_error
    from verifylab.synth.runner import SynthConfig, run_synth_verify

    try:
        cfg = SynthConfig(
            backend=backend,
            comm=comm,
            allreduces_per_layer=allreduces_per_layer,
            norm=norm,
            ranks=ranks,
            tp=tp,
            layers=layers,
            hidden=hidden,
            tokens=tokens,
            steps=steps,
            context=context,
            timeout=timeout,
            profile_dir=profile_dir,
        )
    except ValidationError as exc:
        raise fail(ParameterError(describe_error(exc, "synth-verify"))) from None
    try:
        if run_id:
            from verifylab.runs import RunStore
            from verifylab.synth.record import record_synth_run

            record_synth_run(cfg, RunStore(data_dir / "runs"), run_id, label or f"{backend}, {ranks} ranks")
            console.print(f"stored run {run_id} in {data_dir / 'runs'}")
        else:
            result = run_synth_verify(cfg)
            console.print(f"median step {result['median_step_ms']:.2f} ms; traces in {profile_dir}")
    except VerifylabError as exc:
        raise fail(exc) from None
    if summarize:
        trace_summarize([profile_dir], as_json=False, step_marker=None, message_bytes=None)


@model_app.command("whatif")
def model_whatif(
    data_dir: Path = typer.Option(Path("data"), help="Folder with reference/ (reported) and runs/ (measured)."),
    batch: int = typer.Option(1, min=1, help="Concurrent streams: verify tokens = batch x draft tokens."),
    draft_tokens: int = typer.Option(4, min=1, help="Draft tokens per verify (not reported by the sources)."),
    as_json: bool = typer.Option(False, "--json", help="Print the scenarios as a JSON list."),
) -> None:
    """Verify time and EAGLE-3 tok/s for: baseline, kernel fusion, algorithm substitution, fusion
    (= both), and elimination sized to match — from the reported case study and measured norm costs.

    Example: `verifylab model whatif --json --batch 8`
    """
    from verifylab.model.case import whatif_table

    try:
        frame = whatif_table(data_dir, batch=batch, draft_tokens=draft_tokens)
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(frame.to_json(orient="records", indent=2))
        return
    cols = ["name", "kind", "allreduces_per_pass", "allreduce_us", "verify_ms", "eagle3_tokens_per_s"]
    shown = frame[cols].copy()
    shown[["verify_ms", "eagle3_tokens_per_s"]] = shown[["verify_ms", "eagle3_tokens_per_s"]].round(2)
    print_frame(shown, title=f"what-if at batch {batch} (modelled)")


@model_app.command("pass")
def model_pass(
    compute_ms: float = typer.Option(..., help="The pass without communication, with its add+RMSNorm kernels (ms)."),
    tokens: float = typer.Option(..., help="Tokens per verify pass (k): the all-reduce moves k x hidden bf16 values."),
    latency: str = typer.Option(
        ...,
        help="A stored run id (allreduce_latency), a CSV 'path,impl,tokens,us' or nccl-tests all_reduce_perf output.",
    ),
    path: str = typer.Option(..., help="Which curve: nvlink, shm, socket, ... (nccl-tests output: names its path)."),
    allreduces: int = typer.Option(122, min=0, help="All-reduces per pass (Kimi-K2: 61 layers x 2)."),
    hidden: int = typer.Option(7168, min=1, help="Hidden size (bytes per all-reduce = tokens x hidden x 2)."),
    norm_us: float | None = typer.Option(None, help="One add+RMSNorm kernel (µs); default: the stored measurement."),
    data_dir: Path = typer.Option(Path("data"), help="Folder with runs/ (latency runs, the measured norm)."),
    as_json: bool = typer.Option(False, "--json", help='Print {"variants": [...]}.'),
) -> None:
    """Predict one verify pass per variant (nccl, fused, one all-reduce per layer, compute only) from its
    compute and a measured latency curve, interpolated by message size. Modelled, no constant fitted to the pass.

    Example: `verifylab model pass --compute-ms 8 --tokens 16 --latency curve.csv --path shm --json`
    """
    from verifylab.model.comm_pass import load_curves, norm_us_measured, predict_pass
    from verifylab.runs import RunStore

    store = RunStore(data_dir / "runs") if (data_dir / "runs").is_dir() else None
    try:
        curves = load_curves(latency, store, path, hidden)
        if norm_us is None:
            found = norm_us_measured(store, tokens) if store else None
            norm_us, norm_source = found if found else (0.0, "none stored: 0 (pass --norm-us)")
        else:
            norm_source = "given (--norm-us)"
        variants = predict_pass(compute_ms, tokens, curves, path, norm_us, allreduces, hidden)
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps({"variants": variants, "norm_us": norm_us, "norm_source": norm_source}, indent=2))
        return
    import pandas as pd

    print_frame(pd.DataFrame(variants).round(3), title=f"one pass on {path}, k = {tokens:g} (modelled)")
    console.print(f"norm: {norm_us:.2f} µs ({norm_source})", highlight=False)


@model_app.command("reconcile")
def model_reconcile(
    data_dir: Path = typer.Option(Path("data"), help="Folder with reference/ and runs/."),
    as_json: bool = typer.Option(False, "--json", help="Print the steps as a JSON list."),
) -> None:
    """Reconcile the reported figures step by step, with the arithmetic: 122 = 2 x 61, 205 us per
    all-reduce in verify vs <= 88 us in decode, what 54.1 -> 96.1 tok/s implies, and which share the CUDA
    upgrade, kernel fusion and algorithm substitution could each carry.

    Example: `verifylab model reconcile`
    """
    from verifylab.model.case import reconcile_table

    try:
        frame = reconcile_table(data_dir)
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(frame.to_json(orient="records", indent=2))
        return
    for number, row in enumerate(frame.itertuples(), start=1):
        console.print(f"[bold]{number}. {row.step}[/]  ({row.figures})", highlight=False)
        console.print(f"   {row.arithmetic}", highlight=False)
        console.print(f"   -> {row.verdict}", highlight=False)


@gates_app.command("audit")
def gates_audit(
    root: Path | None = typer.Option(None, help=ROOT_HELP),
    arch: str = typer.Option("sm120", help="Target architecture (sm120 = RTX PRO 6000 / RTX 50 Blackwell)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable findings (+ sha256 of every file)."),
) -> None:
    """Find, by parsing the source, every gate on the fusion and symmetric-memory paths that admits
    SM90/SM100 but not ARCH; plus capability tables, FlashInfer's JIT arch list, the fusion batch limit and
    the non-architecture preconditions (multicast preflight, P2P, FlashInfer version). Writes nothing.

    Example: `verifylab gates audit --root /opt/venv/lib/python3.12/site-packages --json > audit.json`
    """
    from verifylab.gates import audit

    try:
        result = audit(_gates_root(root), arch)
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
        return
    table = Table(title=f"gates for sm{result.target} in {result.root} ({result.versions})")
    for col in ("status", "kind", "file:line", "function", "expression / note"):
        table.add_column(col, overflow="fold")
    for f in result.findings:
        colour = {"closed": "red", "open": "green"}.get(f.status, "yellow")
        table.add_row(
            f"[{colour}]{f.status}[/]",
            f.kind,
            f"{f.file}:{f.line}",
            f.function,
            f.expression + (f"\n{f.note}" if f.note else ""),
        )
    console.print(table)
    console.print(
        f"{len(result.closed)} closed gate(s). A patched gate does not prove fusion runs: only fused "
        "kernels in a profile do (chapter 3)."
    )


@gates_app.command("apply")
def gates_apply(
    root: Path | None = typer.Option(None, help=ROOT_HELP),
    arch: str = typer.Option("sm120", help="Target architecture."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the unified diff and change nothing."),
    audit_json: Path | None = typer.Option(
        None, "--audit", help="An earlier `audit --json`: refuse if a file changed since."
    ),
) -> None:
    """Open the gates on the fusion and symmetric-memory paths: minimal edits in each file's own style
    (`or is_sm120_supported()`, `or _is_sm120_supported` + its module variable and import, `or
    get_platform().is_sm120`, a `12:` table entry, `12` in FlashInfer's JIT list). All files or none;
    backups and sha256 hashes go to ROOT/.verifylab-gates/. Applying twice changes nothing.

    Example: `verifylab gates apply --root site-packages --dry-run`
    """
    from verifylab.gates import apply

    try:
        expected = json.loads(audit_json.read_text())["sha256"] if audit_json else None
        result = apply(_gates_root(root), arch, dry_run=dry_run, expected=expected)
    except (OSError, KeyError, json.JSONDecodeError) as exc:
        raise fail(VerifylabError(f"--audit {audit_json}: not an audit --json file ({exc})")) from None
    except VerifylabError as exc:
        raise fail(exc) from None
    if result.diff:
        typer.echo(result.diff)
    for note in result.notes:
        console.print(f"- {note}", highlight=False)
    if not result.changed:
        console.print("nothing to change: no closed gate")
    elif dry_run:
        console.print(f"dry run: {len(result.changed)} file(s) would change; nothing written")
    else:
        console.print(f"patched {len(result.changed)} file(s); manifest {result.manifest}. Now: verifylab gates verify")


@gates_app.command("verify")
def gates_verify(
    root: Path | None = typer.Option(None, help=ROOT_HELP),
    arch: str = typer.Option("sm120", help="Target architecture."),
) -> None:
    """Check a patched tree: every patched file compiles, re-audit finds no closed gate, and each gate
    evaluates True when the platform predicates say ARCH (no GPU needed). Exit 1 when a check fails.

    Example: `verifylab gates verify --root site-packages`
    """
    from verifylab.gates import verify

    try:
        report = verify(_gates_root(root), arch)
    except VerifylabError as exc:
        raise fail(exc) from None
    for check in report.checks:
        mark = "[green]ok[/]" if check["ok"] else "[red]FAIL[/]"
        console.print(f"{mark} {check['check']} {check.get('detail', '')}", highlight=False)
    if not report.ok:
        raise typer.Exit(code=1)


@gates_app.command("revert")
def gates_revert(root: Path | None = typer.Option(None, help=ROOT_HELP)) -> None:
    """Restore every patched file byte for byte, checked against the sha256 hashes in the manifest.

    Example: `verifylab gates revert --root site-packages`
    """
    from verifylab.gates import revert

    try:
        restored = revert(_gates_root(root))
    except VerifylabError as exc:
        raise fail(exc) from None
    console.print(f"restored {len(restored)} file(s) byte-identical: " + ", ".join(restored), highlight=False)


@gates_app.command("matrix")
def gates_matrix(
    versions: str = typer.Option("0.5.8,0.5.9,0.5.23", help="SGLang versions, comma-separated."),
    flashinfer_versions: str = typer.Option("0.6.4,0.6.17", help="FlashInfer versions (JIT gate), comma-separated."),
    arch: str = typer.Option("sm120", help="Target architecture."),
    out: Path = typer.Option(Path("data/gates/gate_matrix.csv"), help="Where the version x gate table is stored."),
    cache: Path = typer.Option(Path(".cache"), help="Wheel cache (git-ignored)."),
) -> None:
    """Download the published wheels (`pip download --no-deps`), audit each and store the version x gate
    table: which versions need which patch, and next to it (`flashinfer_pins.csv`) the FlashInfer version each
    SGLang wheel pins. Chapter 1 shows both.

    Example: `verifylab gates matrix --versions 0.5.8,0.5.9,0.5.23 --out data/gates/gate_matrix.csv`
    """
    from verifylab.gates.matrix import flashinfer_pins, gate_matrix, matrix_pivot
    from verifylab.iorw import atomic_write_text

    wanted = {
        "sglang": [v for v in versions.split(",") if v],
        "flashinfer": [v for v in flashinfer_versions.split(",") if v],
    }
    try:
        with console.status("auditing") as status:
            frame = gate_matrix(wanted, cache, arch, progress=lambda what: status.update(f"auditing {what}"))
            pins = flashinfer_pins(wanted["sglang"], cache)
    except VerifylabError as exc:
        raise fail(exc) from None
    atomic_write_text(out, frame.to_csv(index=False))
    atomic_write_text(out.with_name("flashinfer_pins.csv"), pins.to_csv(index=False))
    print_frame(matrix_pivot(frame), title=f"gates for {arch} by version (stored in {out})")


def _progress_bar():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )


def _recorder(data_dir: Path, run_id: str | None, label: str | None, params: dict):
    if run_id is None:
        return None
    if not label:
        raise ParameterError(
            "--run-id needs --label (the hardware label shown with every number, e.g. '8x RTX PRO 6000')"
        )
    from verifylab.bench.runner import open_recorder

    return open_recorder(data_dir, run_id, label, params)


def _parse_concurrency(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ParameterError(f"--concurrency {text!r}: expected integers separated by commas, e.g. 1,4,16") from None
    if not values or min(values) < 1:
        raise ParameterError(f"--concurrency {text!r}: every value must be >= 1")
    return values


@app.command()
def bench(
    url: str = typer.Option(..., help="Server URL, e.g. http://127.0.0.1:30000"),
    runs: int = typer.Option(5, min=1, help="Timed runs (one stream, one after the other)."),
    warmup: int = typer.Option(2, min=0, help="Warm-up requests, discarded."),
    max_tokens: int = typer.Option(2048, min=2, help="Output tokens per run (ignore_eos, temperature 0)."),
    api: str = typer.Option("generate", help="generate (SGLang native, counts tokens per chunk) or openai."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (runs, median, CI, accept length)."),
    variant: str = typer.Option("server", help="Name the results are stored under."),
    run_id: str | None = typer.Option(None, help="Store into this run (created or resumed) under DATA_DIR/runs."),
    label: str | None = typer.Option(None, help="Hardware label of the stored run."),
    data_dir: Path = typer.Option(Path("data"), help="Folder holding runs/."),
) -> None:
    """The single-stream method: W warm-ups, then N runs x M tokens at temperature 0, one stream.
    Reports output tokens/s per run, the median with a 95 % bootstrap interval, TPOT statistics and the
    token-weighted accept length (sum of tokens / sum of verify passes), cross-checked with /server_info.

    Example: `verifylab bench --url http://127.0.0.1:30000 --runs 5 --warmup 2 --max-tokens 2048 --json`
    """
    from verifylab.bench.method import SingleStreamConfig
    from verifylab.bench.runner import run_single

    try:
        recorder = _recorder(
            data_dir, run_id, label, {"url": url, "runs": runs, "warmup": warmup, "max_tokens": max_tokens, "api": api}
        )
        with _progress_bar() as progress:
            task = progress.add_task("runs", total=runs)
            summary = run_single(
                url,
                SingleStreamConfig(runs, warmup, max_tokens),
                api,
                recorder=recorder,
                variant=variant,
                progress=lambda _, d, t: progress.update(task, completed=d, total=t),
            )
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    ci = summary["ci95_output_tokens_per_s"]
    console.print(
        f"median {summary['median_output_tokens_per_s'] or 0:.2f} tok/s"
        + (f" (95 % CI {ci[0]:.2f}-{ci[1]:.2f})" if ci else "")
        + f"; accept length {summary['accept_length']}; failed {summary['failed']}"
    )
    for r in summary["runs"]:
        console.print(
            f"  {r['prompt_id']:<22} {r['output_tokens']:>6} tokens "
            f"{(r['output_tokens_per_s'] or 0):8.2f} tok/s  {r['error'] or ''}",
            highlight=False,
        )


@app.command()
def sweep(
    url: str = typer.Option(..., help="Server URL."),
    concurrency: str = typer.Option("1,2,4,8,16,32,64", help="Requests in flight per cell (closed loop)."),
    max_tokens: int = typer.Option(512, min=2, help="Output tokens per request."),
    requests_per_cell: int | None = typer.Option(None, min=1, help="Requests per cell (default max(2C, 8))."),
    api: str = typer.Option("generate", help="generate or openai."),
    stall_timeout: float = typer.Option(60.0, help="Seconds without a byte before a request counts as stalled."),
    as_json: bool = typer.Option(False, "--json", help="Print {cells: [...]} as JSON."),
    variant: str = typer.Option("server", help="Name the results are stored under."),
    run_id: str | None = typer.Option(None, help="Store (and resume) into this run; finished cells are skipped."),
    label: str | None = typer.Option(None, help="Hardware label of the stored run."),
    data_dir: Path = typer.Option(Path("data"), help="Folder holding runs/."),
) -> None:
    """Concurrency sweep: per cell, C requests in flight until the cell's requests finish. Reports aggregate
    output tokens/s, median/p90/p99 inter-token latency (per token, not per chunk), TTFT, TPOT and accept
    length. With --run-id every finished cell is stored at once; rerunning the same command resumes.

    Example: `verifylab sweep --url http://127.0.0.1:30000 --concurrency 1,4,16 --max-tokens 512 --json`
    """
    from verifylab.bench.runner import mark_complete, run_sweep

    try:
        levels = _parse_concurrency(concurrency)
        recorder = _recorder(
            data_dir,
            run_id,
            label,
            {
                "url": url,
                "concurrency": levels,
                "max_tokens": max_tokens,
                "requests_per_cell": requests_per_cell,
                "api": api,
            },
        )
        with _progress_bar() as progress:
            tasks: dict[str, int] = {}

            def update(name: str, done: int, total: int) -> None:
                if name not in tasks:
                    tasks[name] = progress.add_task(name, total=total)
                progress.update(tasks[name], completed=done)

            result = run_sweep(
                url,
                levels,
                max_tokens,
                requests_per_cell,
                api,
                recorder=recorder,
                variant=variant,
                progress=update,
                stall_s=stall_timeout,
            )
        if recorder:
            mark_complete(recorder)
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    import pandas as pd

    if result["skipped_concurrency"]:
        console.print(f"resumed: cells already stored for C = {result['skipped_concurrency']}")
    if result["cells"]:
        frame = pd.DataFrame(result["cells"])[
            [
                "concurrency",
                "requests",
                "failed",
                "output_tokens_per_s",
                "median_itl_ms",
                "p99_itl_ms",
                "median_ttft_ms",
                "accept_length",
            ]
        ]
        print_frame(frame.round(2), title=f"sweep of {url}")


@app.command("serve")
def serve_cmd(
    variant: str = typer.Argument(..., help="baseline, fusion, eagle3, eagle3_fusion or ngram."),
    model_path: str = typer.Option(..., help="Model path or id as SGLang takes it."),
    tp_size: int = typer.Option(1, min=1, help="Tensor-parallel size."),
    port: int = typer.Option(30000, help="Port (the server binds 127.0.0.1)."),
    draft_model_path: str | None = typer.Option(None, help="EAGLE-3 draft model (eagle3 variants)."),
    launcher: str = typer.Option(f"{sys.executable} -m sglang.launch_server", help="Command that starts SGLang."),
    log_dir: Path = typer.Option(Path("serve-logs"), help="Where the server log goes."),
    extra: list[str] = typer.Option([], help="Extra launch arguments (repeat), e.g. --extra=--disable-cuda-graph"),
    hold: bool = typer.Option(True, help="Keep the server up until Ctrl-C (else stop after reporting)."),
) -> None:
    """Start one variant with the flags the installed SGLang knows (checked against its --help first),
    wait for /health_generate, and print the state actually in effect: server args, fusion enabled /
    skipped / off, speculative algorithm, and whether the variant's mechanism can act at all.

    Example: `verifylab serve eagle3_fusion --model-path /models/kimi --tp-size 8 --draft-model-path /models/eagle3`
    """
    import shlex
    from dataclasses import asdict

    from verifylab.serve import DEFAULT_VARIANTS, BaseConfig, serve

    if variant not in DEFAULT_VARIANTS:
        raise fail(VerifylabError(f"unknown variant {variant!r}: choose from {', '.join(DEFAULT_VARIANTS)}"))
    base = BaseConfig(
        model_path=model_path,
        tp_size=tp_size,
        port=port,
        draft_model_path=draft_model_path,
        launcher=shlex.split(launcher),
        extra_args=list(extra),
    )
    try:
        with serve(base, DEFAULT_VARIANTS[variant], log_dir) as (server, state):
            typer.echo(json.dumps({"url": server.url, **asdict(state)}, indent=2, default=str))
            if hold:
                console.print(f"serving {variant} at {server.url}; Ctrl-C stops it")
                while server.proc and server.proc.poll() is None:
                    time.sleep(1)
    except KeyboardInterrupt:
        console.print("stopped")
    except VerifylabError as exc:
        raise fail(exc) from None


def main() -> None:  # pragma: no cover - console entry point alias
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
