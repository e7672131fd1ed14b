"""``verifylab model whatif|pass|reconcile``: the cost model."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from verifylab.cli._shared import console, fail, print_frame
from verifylab.errors import ModelInputError, VerifylabError

model_app = typer.Typer(
    help="Cost model: what-ifs (fusion vs substitution vs elimination), reconciliation.", no_args_is_help=True
)


@model_app.command("whatif")
def model_whatif(
    data_dir: Path = typer.Option(Path("data"), help="Folder with reference/ (reported) and runs/ (measured)."),
    batch: int = typer.Option(1, min=1, help="Concurrent streams: verify tokens = batch x draft tokens."),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as a JSON list."),
) -> None:
    """Every option (TP 8 with NCCL or FlashInfer fusion, TP 4 x PP 2, EP 8 with TP attention, DP attention with
    EP all-to-all) in every communication regime (healthy P2P, host memory, as reported): the verify pass within
    its physical floor and one stream's tok/s as ranges over the draft-token range and the sources' spread.
    Modelled from public, measured and reported figures (chapter 4 names every input).

    Example: `verifylab model whatif --json --batch 8`
    """
    from verifylab.model.case import whatif_table
    from verifylab.store.evidence import Evidence

    try:
        frame = whatif_table(Evidence(data_dir), batch=batch)
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(frame.to_json(orient="records", indent=2))
        return
    from verifylab.model.cycle import Span

    shown = frame[["regime", "option", "allreduces_per_pass"]].copy()
    priced = frame["verify_ms_low"].notna()
    shown["floor ms"] = [Span(r.floor_ms_low, r.floor_ms_high).text(1) for r in frame.itertuples()]
    shown["verify ms"] = [
        Span(r.verify_ms_low, r.verify_ms_high).text(1) if p else r.not_priced
        for r, p in zip(frame.itertuples(), priced, strict=True)
    ]
    shown["tok/s per stream"] = [
        Span(r.tokens_per_s_low, r.tokens_per_s_high).text(0) if p else "—"
        for r, p in zip(frame.itertuples(), priced, strict=True)
    ]
    print_frame(shown, title=f"options at {batch} stream(s) per regime (modelled, ranges)")


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
    from verifylab.store.runs import RunStore

    try:
        store = RunStore(data_dir / "runs").measured() if (data_dir / "runs").is_dir() else None
        curves = load_curves(latency, store, path, hidden)
        if norm_us is None:
            found = norm_us_measured(store, tokens) if store else None
            if found is None:
                raise ModelInputError(
                    f"no measured norm kernel under {data_dir / 'runs'}: give --norm-us (µs of one add+RMSNorm)"
                )
            norm_us, norm_source = found
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
    """Reconcile the reported figures step by step, with the arithmetic: the all-reduce count, the latency per
    all-reduce in verify vs the bound in decode, the two readings of the cycle, what 54.1 -> 96.1 tok/s removed,
    and how much of it kernel fusion and the CUDA upgrade can carry — the rest is an unexplained remainder.

    Example: `verifylab model reconcile`
    """
    from verifylab.model.case import reconcile_table
    from verifylab.store.evidence import Evidence

    try:
        frame = reconcile_table(Evidence(data_dir))
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(frame.to_json(orient="records", indent=2))
        return
    for number, row in enumerate(frame.itertuples(), start=1):
        console.print(f"[bold]{number}. {row.step}[/]  ({row.figures})", highlight=False)
        console.print(f"   {row.arithmetic}", highlight=False)
        console.print(f"   -> {row.verdict}", highlight=False)
