"""``verifylab bench``, ``sweep`` and ``serve``: a live SGLang server, started and measured."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.markup import escape

from verifylab.cli._shared import console, err_console, fail, print_frame, progress_bar
from verifylab.errors import ParameterError, VerifylabError, describe_error
from verifylab.redact import redact_text
from verifylab.server import launch_defaults
from verifylab.server.launch_defaults import HELP as LAUNCH_HELP


def _recorder(
    data_dir: Path, run_id: str | None, label: str | None, params: dict, variant: str, levels: list[int] | None = None
):
    """The run to store into (None without --run-id); the variant's table names are checked before it is opened."""
    if run_id is None:
        return None
    from verifylab.bench.method import BenchRecorder

    BenchRecorder.check_names(variant, levels)
    if not label:
        raise ParameterError(
            "--run-id needs --label (the hardware label shown with every number, e.g. '8x RTX PRO 6000')"
        )
    from verifylab.bench.runner import open_recorder

    return open_recorder(data_dir, run_id, label, params)


def _server_url(url: str) -> str:
    """``--url`` as an http(s) address with a host (a bare name or a typo fails here, before any request)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is no number, or '[::1' without its bracket, raises here
    except ValueError as exc:
        raise ParameterError(f"--url {url!r}: not a valid address ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ParameterError(f"--url {url!r}: not an http:// or https:// address, e.g. http://127.0.0.1:30000")
    return url.rstrip("/")


def _parse_concurrency(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ParameterError(f"--concurrency {text!r}: expected integers separated by commas, e.g. 1,4,16") from None
    if not values or min(values) < 1:
        raise ParameterError(f"--concurrency {text!r}: every value must be >= 1")
    return values


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
    stall_timeout: float = typer.Option(60.0, help="Seconds without a new token before a request counts as stalled."),
) -> None:
    """The single-stream method: W warm-ups, then N runs x M tokens at temperature 0, one stream.
    Reports output tokens/s per run, the median with its order-statistic interval and the coverage that interval
    has (below 6 runs min-max, never called 95 %), TPOT statistics and the token-weighted accept length (sum of
    tokens / sum of verify passes), cross-checked with /server_info. A run with a failed request exits 1.

    Example: `verifylab bench --url http://127.0.0.1:30000 --runs 5 --warmup 2 --max-tokens 2048 --json`
    """
    from verifylab.bench.method import SingleStreamConfig
    from verifylab.bench.runner import mark_complete, run_single

    try:
        url = _server_url(url)
        recorder = _recorder(
            data_dir,
            run_id,
            label,
            {"url": url, "api": api, "single_stream": {"runs": runs, "warmup": warmup, "max_tokens": max_tokens}},
            variant,
        )
        with progress_bar() as progress:
            task = progress.add_task("runs", total=runs)
            summary = run_single(
                url,
                SingleStreamConfig(runs, warmup, max_tokens),
                api,
                recorder=recorder,
                variant=variant,
                progress=lambda _, d, t: progress.update(task, completed=d, total=t),
                stall_s=stall_timeout,
            )
        if recorder and not summary["failed"]:
            mark_complete(recorder)  # a run measured in full is complete, not partial for good
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        _print_single(summary)
    if summary["failed"]:
        errors = "; ".join(sorted({r["error"] for r in summary["runs"] if r["error"]}))
        raise fail(
            VerifylabError(f"{summary['failed']} of {len(summary['runs'])} runs failed ({errors}): not a result")
        )


def _print_single(summary: dict) -> None:
    ci = summary["median_interval_output_tokens_per_s"]
    if summary["median_output_tokens_per_s"] is None:
        console.print("no successful run", highlight=False)
        return
    console.print(
        f"median {summary['median_output_tokens_per_s']:.2f} tok/s"
        + (f" (median's interval {ci[0]:.2f}-{ci[1]:.2f}, coverage {summary['interval_coverage']:.1%})" if ci else "")
        + f"; accept length {summary['accept_length']}; failed {summary['failed']}"
    )
    for note in summary.get("notes", []):
        console.print(f"[yellow]{escape(note)}[/]", markup=True)
    for r in summary["runs"]:
        console.print(
            f"  {r['prompt_id']:<22} {r['output_tokens']:>6} tokens "
            f"{(r['output_tokens_per_s'] or 0):8.2f} tok/s  {r['error'] or ''}",
            highlight=False,
        )


def sweep(
    url: str = typer.Option(..., help="Server URL."),
    concurrency: str = typer.Option("1,2,4,8,16,32,64", help="Requests in flight per cell (closed loop)."),
    max_tokens: int = typer.Option(512, min=2, help="Output tokens per request."),
    requests_per_cell: int | None = typer.Option(None, min=1, help="Requests per cell (default max(2C, 8))."),
    api: str = typer.Option("generate", help="generate or openai."),
    stall_timeout: float = typer.Option(60.0, help="Seconds without a new token before a request counts as stalled."),
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
    from verifylab.bench.runner import failure_line, mark_complete, run_sweep

    try:
        url = _server_url(url)
        levels = _parse_concurrency(concurrency)
        recorder = _recorder(
            data_dir,
            run_id,
            label,
            {
                "url": url,
                "api": api,
                "sweep": {"concurrency": levels, "max_tokens": max_tokens, "requests_per_cell": requests_per_cell},
            },
            variant,
            levels,
        )
        with progress_bar() as progress:
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
        if recorder and not result["failed_cells"]:
            mark_complete(recorder)
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        _print_sweep(url, result)
    if result["failed_cells"]:
        raise fail(VerifylabError(failure_line(result["failed_cells"])))


def _print_sweep(url: str, result: dict) -> None:
    import pandas as pd

    if result["skipped_concurrency"]:
        console.print(f"resumed: cells already stored for C = {result['skipped_concurrency']}")
    for cell in result["cells"]:
        if cell["effective_concurrency"] < cell["concurrency"]:
            console.print(
                f"C={cell['concurrency']}: only {cell['effective_concurrency']} request(s), so at most that many in "
                "flight (stored as effective_concurrency); raise --requests-per-cell",
                highlight=False,
            )
        if cell["median_itl_ms"] is None and cell["requests"] > cell["failed"]:
            console.print(
                f"C={cell['concurrency']}: no inter-token latency: the OpenAI stream does not say how many tokens a "
                "chunk holds (use --api generate)",
                highlight=False,
            )
    if result["cells"]:
        frame = pd.DataFrame(result["cells"])[
            [
                "concurrency",
                "effective_concurrency",
                "requests",
                "failed",
                "output_tokens_per_s",
                "median_itl_ms",
                "p99_itl_ms",
                "median_ttft_ms",
                "accept_length",
            ]
        ]
        print_frame(frame.round(2), title=f"sweep of {redact_text(url)}")


def serve_cmd(
    variant: str = typer.Argument(..., help="baseline, fusion, eagle3, eagle3_fusion or ngram."),
    model_path: str = typer.Option(..., help="Model path or id as SGLang takes it."),
    tp_size: int | None = typer.Option(
        None, min=1, help="Tensor-parallel size (default: what --policy allows, else 1)."
    ),
    port: int = typer.Option(launch_defaults.PORT, help=LAUNCH_HELP["port"]),
    draft_model_path: str | None = typer.Option(None, help=LAUNCH_HELP["draft_model_path"]),
    mem_fraction_static: float | None = typer.Option(None, min=0.01, max=1.0, help=LAUNCH_HELP["mem_fraction_static"]),
    attention_backend: str | None = typer.Option(None, help=LAUNCH_HELP["attention_backend"]),
    launcher: str | None = typer.Option(None, help=LAUNCH_HELP["launcher"]),
    log_dir: Path = typer.Option(Path("serve-logs"), help="Where the server log goes."),
    extra: list[str] = typer.Option([], help="Extra launch arguments (repeat), e.g. --extra=--disable-cuda-graph"),
    hold: bool = typer.Option(True, help="Keep the server up until Ctrl-C (else stop after reporting)."),
    policy: str | None = typer.Option(
        None,
        help="A probe's run id (verifylab comm probe / verifylab box): apply its policy.json: the TP size it allows, "
        "custom all-reduce off where P2P is not healthy, the NCCL variables it unsets; a variant it rules out "
        "(fusion without healthy, checked P2P; TP after a path returned wrong sums) is refused with its reason.",
    ),
    data_dir: Path = typer.Option(Path("data"), help="Folder with runs/ (where --policy's run is)."),
) -> None:
    """Start one variant with the flags the installed SGLang knows (checked against its --help first),
    wait for /health_generate, and print the state actually in effect: server args, fusion enabled /
    skipped / off, speculative algorithm, and whether the variant's mechanism can act at all.
    With --policy, the box's probe decides what may run (nothing starts when it rules the variant out).

    The server lives as long as this command: Ctrl-C, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2 stop it cleanly (its
    log is kept), and on Linux even kill -9 of this command takes the server with it.

    Example: `verifylab serve eagle3_fusion --model-path /models/kimi --tp-size 8 --draft-model-path /models/eagle3`
    """
    import shlex
    from dataclasses import asdict

    from pydantic import ValidationError

    from verifylab.server.launch import serve
    from verifylab.server.variants import DEFAULT_VARIANTS, BaseConfig

    if variant not in DEFAULT_VARIANTS:
        raise fail(VerifylabError(f"unknown variant {variant!r}: choose from {', '.join(DEFAULT_VARIANTS)}"))
    try:
        base = BaseConfig(
            model_path=model_path,
            tp_size=tp_size or launch_defaults.TP_SIZE,
            port=port,
            draft_model_path=draft_model_path,
            mem_fraction_static=mem_fraction_static,
            attention_backend=attention_backend,
            launcher=shlex.split(launcher) if launcher else None,
            extra_args=list(extra),
        )
    except ValidationError as exc:  # pydantic's: imported with the server code above
        raise fail(ParameterError(describe_error(exc, "serve"))) from None
    if policy is not None:
        from verifylab.comm.policy import policy_from_probe, trusted_policy
        from verifylab.server.policy import apply_policy
        from verifylab.store.runs import RunStore

        try:
            store = RunStore(data_dir / "runs")
            manifest = store.manifest(policy)  # a stored run, or an error that lists the stored ones
            environment = dict(manifest.parameters.get("nccl_environment") or {})
            derived = policy_from_probe(
                policy, store.read_table(policy, "verdict"), store.read_table(policy, "allreduce_latency"), environment
            )
            rules = trusted_policy(store.path(policy), derived)
            base = apply_policy(rules, base, DEFAULT_VARIANTS[variant], tp_size)
        except VerifylabError as exc:
            raise fail(exc) from None
        err_console.print(
            f"policy of probe {policy}: --tp-size {base.tp_size}"
            + (f", unset {', '.join(base.unset_env)}" if base.unset_env else "")
            + (", SGLang's custom all-reduce off" if base.disable_custom_all_reduce else ""),
            highlight=False,
            markup=False,
        )
    _stop_on_signals()  # SIGTERM / SIGHUP end the with-block as Ctrl-C does: the server's process group stops too
    try:
        with (
            err_console.status(f"starting {variant}") as status,
            serve(base, DEFAULT_VARIANTS[variant], log_dir, on_wait=_show_wait(status, variant)) as (server, state),
        ):
            status.stop()
            shown = {"url": server.url, "command": redact_text(server.command_line), **asdict(state)}
            typer.echo(json.dumps(shown, indent=2, default=str))
            if hold:
                console.print(f"serving {variant} at {server.url}; Ctrl-C stops it")
                while server.proc and server.proc.poll() is None:
                    time.sleep(1)
    except KeyboardInterrupt:
        console.print("stopped")
    except VerifylabError as exc:
        raise fail(exc) from None


def _show_wait(status, variant: str):
    """Update the spinner while SGLang starts: seconds waited and what its log says now."""

    def show(seconds: float, line: str) -> None:
        said = escape(redact_text(line)[-90:])  # the raw log: SGLang prints its arguments, an API key among them
        status.update(f"starting {variant}: {seconds:.0f} s, waiting for /health_generate  {said}")

    return show


def _stop_on_signals() -> None:
    """Turn SIGTERM, SIGHUP, SIGQUIT and SIGUSR1/2 into KeyboardInterrupt: Python's default for them ends the
    process without leaving ``with`` blocks, and SGLang (in its own session) would keep running. SIGKILL cannot
    be caught: the server then dies with its parent (``verifylab.lifetime``)."""
    import signal

    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, interrupt)
