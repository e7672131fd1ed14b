"""``verifylab comm probe|verdict``: is this box's GPU-to-GPU communication healthy?"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import typer
from rich.markup import escape

from verifylab.cli._shared import console, err_console, fail, print_frame
from verifylab.errors import ParameterError, RunNotFoundError, VerifylabError
from verifylab.intake import require_evidence_folder
from verifylab.vocab import plain_run_id

comm_app = typer.Typer(
    help="Which communication regime this box is in (healthy P2P, host memory, socket, degraded), measured.",
    no_args_is_help=True,
)


def _int_list(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ParameterError(f"{option} '{text}': give a comma-separated list of integers")
    try:
        return [int(p) for p in parts]
    except ValueError:
        raise ParameterError(f"{option} '{text}': not a comma-separated list of integers") from None


MAX_GPUS = 1024  # more GPUs than any one box holds: a count or an index beyond it is a typo


def _gpus(text: str | None) -> list[int] | None:
    """``--gpus 4`` = the first four GPUs; ``--gpus 0,2,4,6`` = those (checked before anything is allocated)."""
    if text is not None and len(text) > 8 * MAX_GPUS:
        raise ParameterError(f"--gpus: more than {MAX_GPUS} GPUs given")
    values = _int_list(text, "--gpus")
    if values is not None and len(values) == 1 and text is not None and "," not in text:
        if not 1 <= values[0] <= MAX_GPUS:
            raise ParameterError(f"--gpus {text}: a GPU count from 1 to {MAX_GPUS}")
        return list(range(values[0]))
    if values is not None and (len(values) > MAX_GPUS or any(not 0 <= v < MAX_GPUS for v in values)):
        raise ParameterError(f"--gpus {text}: GPU indices from 0 to {MAX_GPUS - 1}, at most {MAX_GPUS} of them")
    return values


@comm_app.command("probe")
def probe(
    gpus: str | None = typer.Option(None, help="How many GPUs (4 = GPUs 0-3) or which (0,2,4,6). Default: all."),
    tokens: str | None = typer.Option(
        None,
        help="Token counts to time, comma-separated; each all-reduce moves tokens x hidden x 2 bytes. Default: a "
        "verify pass's 1..512 and chapter 04's streams x draft tokens.",
    ),
    hidden: int = typer.Option(7168, help="Hidden size (Kimi-K2 / DeepSeek-V3: 7168)."),
    timeout: float = typer.Option(120.0, help="Seconds NCCL initialisation, or any one phase, may take."),
    replays: int = typer.Option(15, help="Timed samples per size (the median is reported)."),
    calls: int = typer.Option(10, help="All-reduces per sample (captured in one CUDA graph, or eager)."),
    extra: bool = typer.Option(True, "--extra/--no-extra", help="Also FlashInfer's one-shot, two-shot and fused."),
    subgroups: bool = typer.Option(True, "--subgroups/--no-subgroups", help="More than 2 GPUs: pairs and halves."),
    backend: str = typer.Option("nccl", help="nccl (GPUs) or gloo (CPU processes: the mechanics, no verdict)."),
    ranks: int | None = typer.Option(None, help="gloo only: CPU processes to start."),
    run_id: str | None = typer.Option(None, help="Store as this run in DATA_DIR/runs (default: a dated id)."),
    label: str | None = typer.Option(None, help="Hardware label shown with every figure (default: from the box)."),
    data_dir: Path = typer.Option(Path("data"), help="Folder whose runs/ receives the run."),
    store: bool = typer.Option(True, "--store/--no-store", help="Store the run (--no-store: print only)."),
    work_dir: Path | None = typer.Option(None, help="Keep every process's output here (default: a temp folder)."),
    as_json: bool = typer.Option(False, "--json", help="Print the verdict and the latency table as JSON."),
) -> None:
    """Measure this box's all-reduce where SGLang would run it and say which regime it is in.

    Per message size (a verify pass's tokens x hidden x 2 bytes): NCCL's all-reduce replayed in a CUDA graph
    (as SGLang decodes) and eager, the slowest rank's median with the rank skew apart; FlashInfer's one-shot,
    two-shot and fused all-reduce + RMSNorm where they can run; with more than two GPUs, every pair and both
    halves. Then the P2P matrix (peer access, copy latency and bandwidth, nvidia-smi topo, IOMMU/ACS and driver
    settings, read-only), the transport NCCL chose (its own INFO lines), and a verdict per world size: healthy
    P2P, host-memory fallback, socket or degraded, against public reference bands, with the one change most
    likely to fix it. Stored as a run that `verifylab model pass --latency RUN` and the book read.

    Example: `verifylab comm probe --gpus 8 --run-id 20261201-box-comm --label "8 x RTX PRO 6000, PCIe Gen5"`

    Compare regimes on one box: run it again with `NCCL_P2P_DISABLE=1` (host memory) in the environment.
    """
    from verifylab.comm.config import ProbeConfig
    from verifylab.errors import describe_error

    try:
        from pydantic import ValidationError

        try:
            cfg = ProbeConfig(
                gpus=_gpus(gpus),
                hidden=hidden,
                timeout=timeout,
                replays=replays,
                calls=calls,
                extra_impls=extra,
                subgroups=subgroups,
                backend=backend,
                ranks=ranks,
                **({"tokens": _int_list(tokens, "--tokens")} if tokens is not None else {}),
            )
        except ValidationError as exc:
            raise ParameterError(describe_error(exc, "comm probe")) from None
        if run_id is not None:
            from verifylab.vocab import plain_run_id

            plain_run_id(run_id)
        if backend != "gloo":  # say so in a second on a machine without GPUs (before the run store's imports)
            from verifylab.comm.probe import require_gpu_devices

            require_gpu_devices()
        from verifylab.store.manifest import new_run_id

        run_id = run_id or new_run_id(f"comm-probe-{backend}")
        if store:
            _check_new_run(data_dir, run_id)  # before minutes of measuring, not after
        with tempfile.TemporaryDirectory(prefix="verifylab-probe-") as tmp:
            work = work_dir or Path(tmp)
            raw = _measure(cfg, work)
            tables, manifest = _record(raw, data_dir, run_id, label, store)
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        out = {
            "run_id": manifest.run_id if manifest else None,
            "verdict": tables.verdict.to_dict(orient="records"),
            "allreduce_latency": tables.latency.to_dict(orient="records"),
            "seconds": raw.seconds,
        }
        typer.echo(json.dumps(out, indent=1, default=str))
        return
    _print_summary(tables, raw)
    if manifest is not None:
        where = escape(str(data_dir / "runs"))
        console.print(
            f"stored run [bold]{escape(manifest.run_id)}[/] ({escape(manifest.label)}) in {where}", markup=True
        )


def _check_new_run(data_dir: Path, run_id: str) -> None:
    from verifylab.errors import RunExistsError
    from verifylab.store.runs import RunStore

    runs = RunStore(data_dir / "runs")
    if runs.exists(run_id):  # path() inside names a malformed id
        raise RunExistsError(f"run '{run_id}' already exists in {runs.root}: pick another --run-id")


def _measure(cfg, work: Path):
    from verifylab.cli._shared import progress_bar
    from verifylab.comm.probe import run_probe

    with progress_bar() as bar:
        task = bar.add_task("starting the ranks", total=None)

        def update(done: int, total: int, phase: str) -> None:
            bar.update(task, completed=done, total=total, description=f"probe: {phase}")

        return run_probe(cfg, work, update)


def _record(raw, data_dir: Path, run_id: str, label: str | None, store: bool):
    from verifylab.comm.record import probe_tables, store_probe
    from verifylab.store.public import public_measurements_or_none

    public = public_measurements_or_none(data_dir)
    if not store:
        return probe_tables(raw, public), None
    manifest = store_probe(raw, data_dir / "runs", run_id, label, public)
    return probe_tables(raw, public), manifest


def _print_summary(tables, raw) -> None:
    lat = tables.latency
    world = lat[(lat["group"] == "all") & lat["us"].notna()]
    shown = world.pivot_table(index="tokens", columns=["impl", "mode"], values="us", aggfunc="first")
    shown.columns = [f"{impl} {mode} us" for impl, mode in shown.columns]
    print_frame(shown.round(1).reset_index(), title=f"all-reduce per call, slowest rank's median ({raw.world} ranks)")
    if not tables.p2p.empty:
        print_frame(tables.p2p.round(2), title="P2P matrix")
    for v in tables.verdict.itertuples():
        console.print(
            f"[bold]verdict ({v.world} ranks): {escape(str(v.regime))}[/] — {escape(str(v.reason))}",
            markup=True,
            highlight=False,
        )
        console.print(
            f"  try first: {v.fix_hypothesis}" + (f" (evidence: {v.fix_evidence})" if v.fix_evidence else ""),
            markup=False,
            highlight=False,
        )
        if v.band_evidence:
            console.print(f"  reference: {v.band} [{v.band_evidence}]", markup=False, highlight=False)
    err_console.print(f"probe took {raw.seconds.get('total', 0):.1f} s", highlight=False)


@comm_app.command("verdict")
def verdict(
    run_id: str = typer.Argument(..., help="A stored probe run."),
    data_dir: Path = typer.Option(Path("data"), help="Folder with runs/ and reference/."),
    write: bool = typer.Option(False, help="Rewrite the run's tables (verdict included) from its raw record."),
) -> None:
    """Re-derive a stored probe's tables and verdict from its raw record, against today's public reference
    bands; the measurement itself (manifest, raw record) is not changed.

    Example: `verifylab comm verdict 20261201-091704-2xh200-probe-shm --write`
    """
    from verifylab.comm.record import probe_tables, read_raw, rederive_probe
    from verifylab.store.public import public_measurements_or_none
    from verifylab.store.runs import RunStore

    try:
        plain_run_id(run_id)  # an id that is a path is refused before any folder is looked at
        require_evidence_folder(data_dir, holding=())
        store = RunStore(data_dir / "runs")
        if not store.exists(run_id):
            raise RunNotFoundError(f"no run '{run_id}' in {store.root}")
        public = public_measurements_or_none(data_dir)
        raw = read_raw(store, run_id)
        tables = rederive_probe(store, run_id, public) if write else probe_tables(raw, public)
    except VerifylabError as exc:
        raise fail(exc) from None
    _print_summary(tables, raw)
