"""``verifylab trace summarize`` and ``synth-verify``: profiler traces and the synthetic verify pass."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from verifylab.cli._shared import bytes_progress, console, err_console, fail, print_frame
from verifylab.errors import ParameterError, VerifylabError

trace_app = typer.Typer(help="Profiler traces: per-step all-reduce counts, comm vs compute.", no_args_is_help=True)


STEP_ROWS = 40  # more rank-steps than this are printed by phase
SUMMARY_COLUMNS = {
    "rank": "rank",
    "step": "step",
    "phase": "phase",
    "steps": "steps",
    "ranks": "ranks",
    "allreduce_count": "all-reduces",
    "allreduce_impls": "by impl",
    "comm_us": "comm µs",
    "compute_us": "compute µs",
    "idle_us": "idle µs",
    "exposed_comm_us": "exposed µs",
    "comm_wait_us": "wait µs",
}


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
        None, min=1, help="Bytes per all-reduce when the trace records none (CUDA graphs): tokens x hidden x 2."
    ),
    all_steps: bool = typer.Option(
        False, "--all-steps", help=f"Print every step (more than {STEP_ROWS} rank-steps are shown by phase by default)."
    ),
    csv: Path | None = typer.Option(None, "--csv", help="Also write every step of every rank to this CSV file."),
) -> None:
    """Per rank and step: all-reduces (by implementation), communication, compute, idle, exposed comm.

    A FlashInfer fused all-reduce+RMSNorm kernel counts as an all-reduce; a c10d op and the backend op
    under it count once; NCCL kernel-name suffixes (e.g. _RING_LL) are names, not proof of the protocol.
    A long trace is printed as one row per phase (target, draft, ...), means per step; --all-steps prints every
    step, --csv writes them all.

    Example: `verifylab trace summarize /tmp/sglang_profile/ --csv steps.csv`
    """
    from verifylab.csv_cells import csv_text
    from verifylab.intake import refuse_write_into_data
    from verifylab.iorw import atomic_write_text
    from verifylab.trace import summarize_traces
    from verifylab.trace.files import expand_paths

    try:
        if csv is not None:  # checked before reading: the traces are never overwritten by their own summary
            refuse_write_into_data(csv, "--csv", inputs=(*paths, *expand_paths(paths)), file="steps.csv")
        with bytes_progress("reading traces") as advance:
            summary = summarize_traces(paths, step_marker=step_marker, message_bytes=message_bytes, progress=advance)
        if csv is not None:
            atomic_write_text(csv, csv_text(summary.steps))  # a kernel name never runs as a formula
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps(summary.to_json(), indent=2))
        return
    by_step = all_steps or len(summary.steps) <= STEP_ROWS
    frame = summary.steps if by_step else summary.per_phase()
    columns = {k: v for k, v in SUMMARY_COLUMNS.items() if k in frame.columns}
    frame = frame[list(columns)].rename(columns=columns)
    for col in ["all-reduces", "comm µs", "compute µs", "idle µs", "exposed µs", "wait µs"]:
        frame[col] = frame[col].map(lambda v: "" if v is None or v != v else f"{v:,.0f}")
    files = f"{len(summary.files)} trace file(s)"
    print_frame(frame, title=files if by_step else f"{files}, {len(summary.steps)} rank-steps: mean per step by phase")
    if not by_step:
        console.print("every step: --all-steps (printed), --csv FILE or --json", highlight=False)
    if csv is not None:
        console.print(f"steps written to {csv}", highlight=False)
    for note in summary.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", markup=True)


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

    from verifylab.errors import describe_error
    from verifylab.intake import refuse_write_into_data
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
        refuse_write_into_data(profile_dir, "--profile-dir", data_dir, writes_folder=True)  # traces: not data
        if run_id:
            from verifylab.store.runs import RunStore
            from verifylab.synth.record import record_synth_run

            with err_console.status(f"synthetic verify pass: {ranks} rank(s), {backend}, profiling"):
                record_synth_run(cfg, RunStore(data_dir / "runs"), run_id, label or f"{backend}, {ranks} ranks")
            console.print(f"stored run {run_id} in {data_dir / 'runs'}")
        else:
            with err_console.status(f"synthetic verify pass: {ranks} rank(s), {backend}, profiling"):
                result = run_synth_verify(cfg)
            console.print(f"median step {result['median_step_ms']:.2f} ms; traces in {profile_dir}")
    except VerifylabError as exc:
        raise fail(exc) from None
    if summarize:
        trace_summarize([profile_dir], as_json=False, step_marker=None, message_bytes=None, all_steps=False, csv=None)
