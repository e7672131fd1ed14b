"""``verifylab model whatif|pass|reconcile``: the cost model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from verifylab.cli._shared import console, engine_options, evidence_at, fail, print_frame
from verifylab.cli.model_options import choice, gpu_key, matched_accept_high, regime_of, stream_counts
from verifylab.errors import VerifylabError
from verifylab.vocab import streams_words

model_app = typer.Typer(
    help="Cost model: what-ifs (fusion vs substitution vs elimination), reconciliation.", no_args_is_help=True
)


_SPECULATION_ENGINE = engine_options()


@model_app.command("whatif")
def model_whatif(
    data_dir: Path = typer.Option(Path("data"), help="Folder with reference/ (reported) and runs/ (measured)."),
    batch: int = typer.Option(1, min=1, help="Concurrent streams: verify tokens = batch x draft tokens."),
    latency: str | None = typer.Option(
        None,
        help="Your box's curve, priced as the row 'this box': a stored 8-GPU probe's run id (verifylab comm probe), "
        "a CSV 'path,impl,tokens,us' or nccl-tests output (read as 8 ranks). Default: the newest 8-GPU probe "
        "stored in --data-dir, if any.",
    ),
    path: str | None = typer.Option(None, help="Which NCCL path of --latency (shm, p2p, ...), when it has several."),
    decode_tok_s: float | None = typer.Option(
        None,
        help="Plain decoding at one stream (tok/s) to calibrate EAGLE-3's gain to (default: the case study's "
        "reported 92.6).",
    ),
    context: int | None = typer.Option(
        None,
        min=1,
        max=1 << 21,
        help="Tokens of KV each stream holds (default: the book's 2048): every option and the speculation crossover "
        "are priced at it, attention with the terms fitted on the public per-context matrix (chapter 4).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as a JSON list."),
) -> None:
    """Every option (TP 8 with NCCL or FlashInfer fusion, TP 4 x PP 2, EP 8 with TP attention, DP attention with
    EP all-to-all) in every communication regime (healthy P2P, host memory, as reported), and on your own box when
    a probe or a curve of it is given: the verify pass within its physical floor and one stream's tok/s as ranges
    over the draft-token range and the sources' spread. Modelled from public, measured and reported figures
    (chapter 4 names every input); the output says which curve priced 'this box'.

    Example: `verifylab model whatif --batch 8 --decode-tok-s 80`; your box's own curve: add `--latency RUN` (a
    stored 8-GPU probe of it)
    """
    from verifylab.model.answers.model_commands import whatif_answer

    try:
        answer = whatif_answer(evidence_at(data_dir), batch, latency, path, decode_tok_s, context)
    except VerifylabError as exc:
        raise fail(exc) from None
    frame, box_words, cases, gains, decode_source = (
        answer.table,
        answer.box_words,
        answer.cases,
        answer.gains,
        answer.decode_source,
    )
    if as_json:
        typer.echo(frame.to_json(orient="records", indent=2))
        return
    from verifylab.span import Span

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
    print_frame(shown, title=f"options at {streams_words(batch)} per regime (modelled, ranges)")
    console.print(f"this box: {box_words}", highlight=False, markup=False)
    for regime in cases:
        console.print(
            f"EAGLE-3 vs plain decoding (TP 8, NCCL), {regime.value}: gain {gains[regime.value].text(2)} at "
            f"{streams_words(batch)}; {answer.off_words[regime]}; calibrated to {decode_source} (verifylab model "
            "speculation)",
            highlight=False,
            markup=False,
        )


@model_app.command("speculation")
def model_speculation(
    config: Path = typer.Option(
        ...,
        help="The served model's config.json (or its folder): any Llama, Qwen, "
        "Qwen-MoE, DeepSeek-V2/V3 or Kimi-K2 shape.",
    ),
    gpu: str = typer.Option(
        ..., help="h200, h100 or rtx-pro-6000 (datasheet x the fraction of it a stored run measured on an H200)."
    ),
    accept: float | None = typer.Option(
        None,
        help="Mean accepted tokens per verify on your traffic (1 to --draft-tokens). Required, except where a public "
        "per-context matrix ran your box: then its own accept length (a range) is the default.",
    ),
    drafter: str = typer.Option("eagle3", help="eagle3 (a draft model) or ngram (no model: a CPU matcher)."),
    draft_tokens: int = typer.Option(4, min=2, max=64, help="Tokens per verify of the chain (the root included)."),
    tp: int = typer.Option(
        1, min=1, max=64, help="Tensor-parallel size (all-reduces priced from --regime or --latency)."
    ),
    regime: str | None = typer.Option(
        None,
        help="healthy-p2p, host-memory or degraded (or as pages spell them: 'healthy P2P' ...): the all-reduce "
        "curve of that regime (chapter 4).",
    ),
    latency: str | None = typer.Option(
        None,
        help="Your box's curve instead: a stored run id (verifylab comm "
        "probe), a CSV 'path,impl,tokens,us' or nccl-tests output.",
    ),
    path: str | None = typer.Option(None, help="Which NCCL path of --latency (shm, p2p, ...), when it has several."),
    pcie_ipc: bool = typer.Option(
        False,
        "--pcie-ipc",
        help="Price the all-reduces on SGLang's PCIe-IPC all-reduce (its opt-in switch), as `box --plan` does where "
        "it launches it; NCCL otherwise. With --regime, where a curve prices it at --tp; --decode-tok-s is read as "
        "measured on NCCL (the host overhead it sets is carried over).",
    ),
    fusion: bool = typer.Option(
        False, "--fusion", help="Likewise on FlashInfer's fused all-reduce + RMSNorm, as `box --plan` prices it."
    ),
    decode_tok_s: float | None = typer.Option(
        None, help="Your box's plain decoding at one stream (tok/s): sets the host overhead for your box."
    ),
    draft_config: Path | None = typer.Option(
        None, help="The EAGLE-3 draft's config.json (default: one Llama layer of the target's width)."
    ),
    expert_bits: float | None = typer.Option(
        None, help="Bits per routed-expert weight: 4 (INT4, group-32 scales), 8 or 16 (default: bf16)."
    ),
    bandwidth_gbs: float | None = typer.Option(None, help="Effective memory bandwidth (GB/s) instead of the table's."),
    tflops: float | None = typer.Option(None, help="Effective dense bf16 TFLOP/s instead of the table's."),
    context: int = typer.Option(
        2048,
        min=1,
        max=1 << 21,
        help="Tokens of KV each stream attends over. Where a public per-context matrix ran your box (same GPUs, model "
        "shape, regime and chain), the answer is that matrix moved to this context (chapter 4).",
    ),
    mem_fraction: float | None = typer.Option(
        None,
        min=0.05,
        max=0.99,
        help="Of each GPU's memory, what your server gives weights and KV (SGLang's --mem-fraction-static): the KV "
        "pool it leaves caps the distinct streams that run at once at --context; the rest queue. Default: the pool "
        "a matching public page states (at its KV dtype), else 0.9.",
    ),
    engine: str = _SPECULATION_ENGINE["engine"],
    attention_backend: str | None = _SPECULATION_ENGINE["attention_backend"],
    verify_kernel: str | None = _SPECULATION_ENGINE["verify_kernel"],
    kv_cache_dtype: str | None = _SPECULATION_ENGINE["kv_cache_dtype"],
    shared_prefix: bool = typer.Option(
        False,
        "--shared-prefix",
        help="Your streams share one prompt prefix (the pool holds it once): no cap on streams by the KV pool. "
        "Default: distinct sessions, each holding its --context tokens.",
    ),
    routing: str = typer.Option(
        "uniform",
        help="uniform (a trained router) or collapsed (every token to the "
        "same experts: random weights fed identical tokens).",
    ),
    streams: str = typer.Option("1,2,4,8,16,24,32,48,64,96,128", help="Stream counts, comma-separated."),
    data_dir: Path = typer.Option(
        Path("data"),
        help="Folder with runs/: the H200 speculation grid the overheads "
        "are fitted on, the measured GPU ceilings, probe runs.",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help='Print {"rows": [...], "crossover_streams_low", "crossover_streams_high", "inputs": {...}}.',
    ),
) -> None:
    """Predict plain and speculative tok/s per stream count for any model config and GPU, the gain, and where it
    falls below 1 (the crossover, a range). Physics from the config (bytes and arithmetic per pass), all-reduces
    from a regime or your own curve, and the overheads measured on the stored H200 speculation grid (fitted on
    plain decoding and one accept length, checked against the others: chapter 2). Modelled; every input is named
    in the output.

    Example: `verifylab model speculation --config examples/configs/qwen3-30b-a3b --gpu h100 --accept 2.5 --json`
    """
    from verifylab.model.answers.speculation_answer import (
        ROUTINGS,
        UNPHYSICAL_WORDS,
        Routing,
        SpeculationAsk,
        speculation_reply,
    )
    from verifylab.model.answers.words import stop_range_words
    from verifylab.vocab import Drafter

    try:
        chosen = choice("--drafter", drafter, [d.value for d in Drafter])
        ask = SpeculationAsk(
            config=config,
            gpu=gpu_key(gpu),
            tp=tp,
            drafter=Drafter(chosen),
            draft_tokens=draft_tokens,
            accept=accept,
            streams=stream_counts(streams),
            context=context,
            mem_fraction=mem_fraction,
            routing=Routing(choice("--routing", routing, list(ROUTINGS))),
            regime=regime_of(regime) if regime is not None else None,
            latency=latency,
            path=path,
            decode_tok_s=decode_tok_s,
            draft_config=draft_config,
            expert_bits=expert_bits,
            bandwidth_gbs=bandwidth_gbs,
            tflops=tflops,
            engine=engine,
            attention_backend=attention_backend,
            verify_kernel=verify_kernel,
            kv_cache_dtype=kv_cache_dtype,
            shared_prefix=shared_prefix,
            pcie_ipc=pcie_ipc,
            fusion=fusion,
        )
        reply = speculation_reply(evidence_at(data_dir), ask)
    except VerifylabError as exc:
        raise fail(exc) from None
    result, target, provenance, consistent = reply.result, reply.target, reply.provenance, reply.consistent
    counts, decision = ask.streams, reply.decision
    low, high = result.crossover if decision is None else decision.stops
    limit = accept if accept is not None else matched_accept_high(result)
    rows = [{**r.as_row(), "check": flag} for r, flag in zip(result.rows, reply.checks(limit), strict=True)]
    inputs_used = {**result.inputs, **({"consistent": consistent} if consistent is not None else {})}
    if as_json:
        payload: dict[str, Any] = {
            "rows": rows,
            "crossover_streams_low": low,
            "crossover_streams_high": high,
            "stream_cap": result.stream_cap,
            "provenance": provenance,
            "inputs": inputs_used,
        }
        if decision is not None:  # the crossover above is the decision's; the transfer's own at your stream counts
            payload["decision"] = decision.setting
            payload["crossover_widened_by"] = decision.widened
            payload["transfer_crossover_streams"] = list(result.crossover)
        typer.echo(json.dumps(payload, indent=2))
        return
    import pandas as pd

    shown = pd.DataFrame(
        {
            "streams": [r.streams for r in result.rows],
            "plain tok/s": [r.plain_tokens_per_s.text(0) for r in result.rows],
            f"{chosen} tok/s": [r.spec_tokens_per_s.text(0) for r in result.rows],
            "gain": [r.gain.text(2) for r in result.rows],
        }
    )
    yields = accept if accept is not None else matched_accept_high(result)
    flags = reply.checks(yields)
    if any(flags):
        shown["check"] = ["unphysical: see below" if f else "" for f in flags]
    accept_words = f"accept {accept:g}" if accept is not None else "the evidence's accept length"
    print_frame(shown, title=f"{target.name}: {chosen}, {accept_words}, {draft_tokens} draft tokens ({provenance})")
    last = max(r.streams for r in result.rows) if result.rows else max(counts)

    def stops(low: float | None, high: float | None) -> str:
        return stop_range_words((low, high), counts[0], last)

    capped = result.stream_cap is not None and result.stream_cap <= last
    if decision is not None:
        t_low, t_high = result.crossover
        limit_words = (
            f"decision: {decision.setting} ({decision.rung.value}, over the {decision.last} streams its matrix spans; "
            f"where it stops paying widened by the transfers' out-of-sample miss, {decision.widened:.0%}: the decision "
            f"page's band)\n  the transfer itself at your stream counts: it {stops(t_low, t_high)}"
        )
    elif low is None and high is None:
        limit_words = f"speculation pays at every stream count priced, up to {last}" + (
            " (the KV pool's distinct streams at this context)" if capped else ""
        )
    else:
        limit_words = f"speculation {stops(low, high)}"
    console.print(limit_words, highlight=False)
    for name, value in inputs_used.items():
        console.print(f"  {name}: {value}", highlight=False, markup=False)
    if any(flags):
        console.print(f"check: {UNPHYSICAL_WORDS}", highlight=False, markup=False)


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
    unfused_us: float | None = typer.Option(
        None,
        help="One unfused all-reduce as your box runs it inside a pass (µs), e.g. SGLang's custom all-reduce read "
        "from a trace; default: the NCCL curve. Price a box with the collective it runs.",
    ),
    data_dir: Path = typer.Option(Path("data"), help="Folder with runs/ (latency runs, the measured norm)."),
    isolated: bool = typer.Option(
        False,
        "--isolated",
        help="Price each all-reduce at its isolated latency (default: times what it costs inside a pass over its "
        "isolated latency: NCCL's from the stored synthetic passes' traces per path, the fused kernel's from the "
        "fit over every stored trace at this message size).",
    ),
    as_json: bool = typer.Option(False, "--json", help='Print {"variants": [...], "in_pass_factors": {...}}.'),
) -> None:
    """Predict one verify pass per variant (nccl, fused, one all-reduce per layer, compute only) from its
    compute and a measured latency curve, interpolated by message size, each all-reduce priced as it runs inside a
    pass (the stored traces' in-pass factor for that path; --isolated: as measured alone). Modelled, no constant
    fitted to the pass.

    Example: `verifylab model pass --compute-ms 8 --tokens 16 --latency 20261201-091704-2xh200-probe-shm --path shm
    --json` (or a curve file of your own: `--latency curve.csv`)
    """
    from verifylab.model.answers.model_commands import pass_answer
    from verifylab.store.runs import RunStore

    try:
        store = RunStore(data_dir / "runs").measured() if (data_dir / "runs").is_dir() else None
        answer = pass_answer(
            store, compute_ms, tokens, latency, path, hidden, allreduces, norm_us, isolated, unfused_us
        )
    except VerifylabError as exc:
        raise fail(exc) from None
    variants, norm_us, norm_source, factors = answer.variants, answer.norm_us, answer.norm_source, answer.factors
    if as_json:
        payload = {
            "variants": variants,
            "norm_us": norm_us,
            "norm_source": norm_source,
            "in_pass_factors": factors,
            "unfused_us": unfused_us,
        }
        typer.echo(json.dumps(payload, indent=2, allow_nan=False))  # strict JSON: every input was checked finite
        return
    import pandas as pd

    print_frame(pd.DataFrame(variants).round(3), title=f"one pass on {path}, k = {tokens:g} (modelled)")
    console.print(f"norm: {norm_us:.2f} µs ({norm_source})", highlight=False)
    shown = ", ".join(f"{impl} x{f:.2f}" for impl, f in sorted(factors.items())) or "none (isolated latencies)"
    console.print(f"in-pass factors on {path}: {shown}", highlight=False)
    if unfused_us is not None:
        console.print(f"unfused all-reduce: {unfused_us:g} µs per call as given (--unfused-us), not the NCCL curve")


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
    from verifylab.model.answers.model_commands import reconcile_answer

    try:
        frame = reconcile_answer(evidence_at(data_dir))
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(frame.to_json(orient="records", indent=2))
        return
    for number, row in enumerate(frame.itertuples(), start=1):
        step = Text(f"{number}. {row.step}", style="bold") + f"  ({row.figures})"  # text, not markup
        console.print(step, f"   {row.arithmetic}", f"   -> {row.verdict}", sep="\n", highlight=False)
