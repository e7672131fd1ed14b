"""``verifylab box --plan`` / ``--verify``: the configuration with the most goodput under the owner's SLO, the
runner-up and the plan that measures them (no GPU), then the measurement on the box and the model's error."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from rich.table import Table

from verifylab.cli._shared import console, err_console
from verifylab.errors import ParameterError, VerifylabError
from verifylab.launch import AllReduce, LaunchError, LaunchTarget, SglangLaunch, build_command
from verifylab.model.answers.box_decision import BoxInputs, probed_box
from verifylab.model.answers.box_plan import (
    DRAFT_TOKENS,
    BoxPlan,
    Priced,
    RateSource,
    Slo,
    choose,
    startup_seconds,
)
from verifylab.model.answers.context_answer import anchored_answer, matching_matrix, transfer_rates
from verifylab.model.fits.context import AttentionFit
from verifylab.model.fits.grid import measured_overheads
from verifylab.model.inputs.configs import eagle3_draft_for, kimi_k25_costs, read_config
from verifylab.model.inputs.context_matrix import ContextMatrix
from verifylab.model.inputs.gpus import gpu_named
from verifylab.model.inputs.model_costs import Routing
from verifylab.model.inputs.stored import stored_inputs, stored_runs
from verifylab.model.pricing.attention import BYTES_ONCE_PER_PASS, DEFAULT_MEM_FRACTION, AttentionTerms
from verifylab.model.pricing.boxes import calibrate_decode, layout_fits, regime_curve
from verifylab.model.pricing.collectives import RegimeCurves
from verifylab.model.pricing.pricer import Box
from verifylab.model.pricing.regimes import PRICED_REGIMES
from verifylab.sources import MeasuredRuns, ModelSources
from verifylab.span import Span
from verifylab.vocab import RECOMMENDED_STACK, REGIME_KEYS, Drafter, Regime, regime_named


class CheckError(VerifylabError):
    """A `box --verify` whose measurement cannot be trusted: a server died, left cells, or ignored its accept
    length (the command ends non-zero, naming the cells)."""


DEFAULT_ACCEPT = 2.0  # where neither the owner nor any evidence gives an accept length (said in the plan's inputs)


def _regime_of(text: str | None) -> Regime | None:
    """``--regime`` in either spelling (``healthy-p2p`` or ``healthy P2P``), refused in one line otherwise."""
    if text is None:
        return None
    try:
        return regime_named(text)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None


@dataclass(frozen=True)
class PlanRequest:
    """What the owner states for a plan (the CLI's options, typed)."""

    load: int
    slo: Slo
    accept: float | None  # None: the evidence's own where a public matrix ran the box, else 2
    draft_tokens: int
    config: Path | None
    draft_config: Path | None
    gpu: str | None  # None: the probe's GPU, else h200
    tp: int
    decode_tok_s: float | None
    overlap: Span
    prompt_tokens: int
    output_tokens: int
    budget_minutes: float
    expert_bits: float | None = None
    regime: str | None = None  # TP > 1 before the box is probed: price its all-reduces in this regime (public curves)
    probe: str | None = None  # a stored probe of the box: its TP, GPU and own all-reduce curve
    sglang: str = RECOMMENDED_STACK[0]  # the SGLang version the printed command is built for
    context: int | None = None  # tokens of KV a stream holds while it decodes (None: prompt + half the output)
    attention: AttentionTerms = BYTES_ONCE_PER_PASS  # attention over context (the evidence's terms, where stored)

    @property
    def decode_context(self) -> float:
        """The context a decoding stream attends over: the one given, else its prompt and half its output."""
        return float(self.context) if self.context is not None else self.prompt_tokens + self.output_tokens / 2


def parse_overlap(text: str) -> Span:
    """``0.3`` or ``0.2-0.6``: how much a verify chain's tokens share experts (0..1)."""
    try:
        parts = [float(p) for p in text.split("-")] if text.count("-") <= 1 else []
    except ValueError:
        parts = []
    if len(parts) not in (1, 2) or not all(0.0 <= p <= 1.0 for p in parts):
        raise ParameterError(f"--overlap {text!r}: a share from 0 to 1, or a range such as 0.2-0.6")
    return Span.of(*parts)


def plan_box(
    runs: MeasuredRuns, req: PlanRequest, curves: RegimeCurves | None = None, ev: ModelSources | None = None
) -> BoxPlan:
    """The plan for a box at TP ``req.tp``: TP 1 has no all-reduce; a larger TP prices its all-reduces in the named
    ``req.regime`` from the public and measured curves (``curves``; modelled, before the box is probed). Where a
    public per-context matrix in ``ev`` ran this box, the plan's rates are that matrix moved to the owner's context."""
    if req.probe is not None:
        return _plan(runs, req, _from_probe(runs, req))
    if req.tp > 1 and (req.regime is None or curves is None):
        regimes = ", ".join(repr(r.value) for r in PRICED_REGIMES)
        raise ParameterError(f"--tp {req.tp}: name the box's communication regime with --regime ({regimes})")
    if req.gpu is None:
        raise ParameterError(
            "--gpu: name the box's GPU (h200, h100, rtx-pro-6000), or give --probe RUN of the box: a plan never "
            "assumes one"
        )
    target = read_config(req.config, req.expert_bits) if req.config else kimi_k25_costs()
    gpu = gpu_named(req.gpu, stored_runs(runs).ceilings)
    layout_fits(target, gpu, req.tp)
    draft = read_config(req.draft_config) if req.draft_config else eagle3_draft_for(target)
    curve, comm = None, "TP 1: no all-reduce"
    regime = _regime_of(req.regime)
    if req.tp > 1 and curves is not None and regime is not None:
        if regime not in PRICED_REGIMES:
            raise ParameterError(f"--regime {req.regime!r}: one of {', '.join(r.value for r in PRICED_REGIMES)}")
        curve, comm = regime_curve(curves, regime, req.tp)
    box = Box(
        target,
        gpu,
        tp=req.tp,
        draft=draft,
        context=req.decode_context,
        attention=req.attention,
        mem_fraction=DEFAULT_MEM_FRACTION,
        routing=Routing.UNIFORM,
        chain_overlap=req.overlap,
        allreduce_us=curve,
        comm_source=comm + (" (modelled: the box is not probed)" if req.tp > 1 else ""),
    )
    matched = None
    if ev is not None and req.decode_tok_s is None and req.gpu is not None:
        key = next((k for k, v in REGIME_KEYS.items() if regime is not None and v == regime.value), None)
        matched = matching_matrix(stored_inputs(ev), target, req.gpu, req.tp, key, Drafter.EAGLE3, req.draft_tokens)
    plan = _plan(runs, req, box, matched)
    p2p = regime in (Regime.HEALTHY_P2P, Regime.NCCL_SLOW)
    return replace(plan, collective="pcie_ipc" if req.tp > 1 and p2p else "nccl")


def _from_probe(runs: MeasuredRuns, req: PlanRequest) -> Box:
    """The box its stored probe measured (TP as its policy allows, its own NCCL curve), with the plan's routing."""
    assert req.probe is not None
    inputs = BoxInputs(
        req.probe,
        req.decode_tok_s or 1.0,
        "given",
        req.accept if req.accept is not None else DEFAULT_ACCEPT,
        req.draft_tokens,
        req.config,
        req.gpu,
        draft_config=req.draft_config,
        expert_bits=req.expert_bits,
    )
    return replace(probed_box(runs, inputs).box, chain_overlap=req.overlap)


def _plan(
    runs: MeasuredRuns, req: PlanRequest, box: Box, matched: tuple[ContextMatrix, AttentionFit] | None = None
) -> BoxPlan:
    """Choose on ``box`` with the overheads of the stored grid, calibrated to the owner's decode rate if given; with
    ``matched`` evidence, on its rates at the owner's context (its chain only; prefill stays modelled)."""
    target, gpu = box.target, box.gpu
    measured = measured_overheads(stored_runs(runs))
    calibrated = calibrate_decode(box, measured, req.decode_tok_s, "given (--decode-tok-s)")
    evidence: dict[str, str] = {}
    accept = req.accept if req.accept is not None else DEFAULT_ACCEPT
    rates: RateSource | None = None
    chains: tuple[int, ...] = DRAFT_TOKENS
    if matched is not None:
        matrix, fit = matched
        rates, chains = transfer_rates(matrix, fit, box.context, own_accept=req.accept is None), (matrix.verify_tokens,)
        answer = anchored_answer(matrix, fit, box.context, req.accept, matrix.streams)
        accept = req.accept if req.accept is not None else (matrix.accept.low + matrix.accept.high) / 2
        low, high = answer.crossover
        evidence = {
            "evidence": answer.inputs["evidence"],
            "transfer": answer.inputs["transfer"],
            "speculation stops paying": f"from {_streams_words(low, matrix)} to {_streams_words(high, matrix)} at "
            f"{box.context:g} tokens of context (EAGLE-3, {matrix.verify_tokens} tokens per verify, accept "
            + (f"{req.accept:g})" if req.accept is not None else f"{matrix.accept.text(2)}: the page's own)"),
            "other chains": "not offered: no evidence measured them at your context",
        }
    plan = choose(
        box,
        calibrated.overheads,
        req.load,
        req.slo,
        accept,
        req.draft_tokens,
        req.prompt_tokens,
        req.output_tokens,
        req.budget_minutes,
        startup_seconds(target.weights_bytes(box.tp)),
        rates=rates,
        chains=chains,
    )
    inputs = {
        "model": target.name,
        "gpu": f"{gpu.name} x {box.tp}",
        "all-reduce": box.comm_source,
        "weights": target.quantization,
        "context": f"{box.context:g} tokens of KV per decoding stream",
        **evidence,
        "routing overlap": f"{req.overlap.text(2)} of a chain's tokens share experts",
        "host overhead": calibrated.host_note if matched is None else "in the evidence's own rates",
        **plan.inputs,
    }
    return replace(plan, inputs=inputs, tp=box.tp)


def _streams_words(value: float | None, matrix: ContextMatrix) -> str:
    return f"beyond {max(matrix.streams)} streams" if value is None else f"{value:.1f} streams"


def print_plan(plan: BoxPlan, target: LaunchTarget, loop_error: str = "") -> None:
    """The choice, the runner-up and plain decoding at the owner's load, then what measuring them costs."""
    table = Table(title=f"at {plan.load} streams, {plan.inputs['slo']}", title_justify="left")
    for column in ("", "configuration", "goodput tok/s", "tok/s", "ms per token", "first token ms"):
        table.add_column(column, overflow="fold")
    for role, priced in (("choice", plan.chosen), ("runner-up", plan.runner_up), ("plain", plan.plain)):
        c = priced.at_load
        table.add_row(
            role,
            priced.config.words(),
            c.goodput.text(0),
            c.tokens_per_s.text(0),
            c.tpot_ms.text(1),
            c.ttft_ms.text(0),
        )
    console.print(table)
    servers = len(plan.measured_configs)
    console.print(
        f"plan: {servers} servers one after another, each at {', '.join(map(str, plan.streams))} streams: about "
        f"{plan.minutes:.1f} of the {plan.budget_minutes:g} minutes of GPU time allowed",
        highlight=False,
    )
    for name, value in plan.inputs.items():
        console.print(f"  {name}: {value}", highlight=False, markup=False)
    if loop_error:
        console.print(f"  this loop's last check: {loop_error}", highlight=False, markup=False)
    chosen, runner = plan.chosen.at_load.goodput, plan.runner_up.at_load.goodput
    if chosen.high <= 0:
        console.print(
            f"nothing meets the SLO at {plan.load} streams ({plan.inputs['slo']}): no launch command. Relax the SLO or "
            "the load; the table shows how far each configuration is from it.",
            highlight=False,
            markup=False,
        )
        return
    if runner.high >= chosen.low:  # overlapping goodput: the model cannot tell them apart
        console.print(
            f"a tie: the choice's goodput ({chosen.text(0)}) and the runner-up's ({runner.text(0)}) overlap; "
            "`verifylab box --plan --verify FILE` breaks it on the box (the plan above)",
            highlight=False,
            markup=False,
        )
    command = launch_words(plan.chosen, plan.tp, target, collective=plan.collective)
    console.print(f"  launch the choice: {command}", highlight=False, markup=False, soft_wrap=True)
    console.print("modelled: `verifylab box --verify FILE` measures these on the box", highlight=False)


def launch_words(
    priced: Priced,
    tp: int,
    target: LaunchTarget,
    model_path: str = "<model-path>",
    draft_path: str = "<EAGLE-3-draft-path>",
    collective: str = "nccl",
) -> str:
    """The command that serves a configuration at TP ``tp``, built for ``target`` and shell-quoted (why not, where the
    target cannot run it); ``collective`` ``pcie_ipc``: SGLang's PCIe-IPC all-reduce where the target runs it."""
    c = priced.config
    settings: dict = {"model_path": model_path, "tp_size": tp, "max_running_requests": c.max_running}
    if collective == "pcie_ipc" and tp > 1 and target.has_pcie_ipc:
        settings["allreduce"] = AllReduce.PCIE_IPC
    launch = (
        SglangLaunch(**settings)
        if c.drafter is None
        else SglangLaunch.speculative(c.drafter.algorithm, c.draft_tokens, draft_path, **settings)
    )
    try:
        return build_command(launch, target).shell()
    except LaunchError as exc:
        return f"no command: {exc}"


def _port_free(host: str, port: int) -> bool:
    import socket

    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host or "127.0.0.1", port)) != 0


def _print_dry_run(plan: BoxPlan, settings) -> None:
    """What `--verify` would start, where and in which order, without starting anything."""
    base = settings.base
    console.print(
        f"dry run: {len(plan.measured_configs)} servers one after another on {' '.join(base.launcher)} at TP "
        f"{base.tp_size}, port {base.port}, model {base.model_path}; each swept at {', '.join(map(str, plan.streams))} "
        f"streams, {settings.output_tokens} output tokens a request (about {plan.minutes:.1f} minutes):",
        highlight=False,
        markup=False,
    )
    for n, config in enumerate(plan.measured_configs, start=1):
        console.print(f"  [{n}] {config.words()}", highlight=False, markup=False)


def verify_on_box(plan: BoxPlan, settings_file: Path, data_dir: Path, run_id: str, dry_run: bool = False) -> None:
    """Measure the plan on this box into run ``run_id``, store the comparison and print the verdict."""
    from verifylab.analysis.box_verify import compare, untrusted_cells, verdict
    from verifylab.bench.box_verify import VerifySettings, run_verify
    from verifylab.sources import MeasuredRuns as Runs
    from verifylab.store.evidence import Evidence
    from verifylab.store.runs import RunStore
    from verifylab.strict_yaml import read_strict_yaml_file

    raw = read_strict_yaml_file(settings_file, "verify settings", ParameterError)
    try:
        settings = VerifySettings.model_validate(raw)
    except ValueError as exc:
        raise ParameterError(f"--verify {settings_file}: {str(exc).splitlines()[0]}") from None
    store = RunStore(data_dir / "runs")
    if settings.base.tp_size != plan.tp:
        raise ParameterError(
            f"--verify {settings_file}: tp_size {settings.base.tp_size} against the plan's TP {plan.tp}: the check "
            "measures the layout the plan priced (give --tp, or fix the file)"
        )
    if not _port_free(settings.base.host, settings.base.port):
        raise ParameterError(
            f"--verify {settings_file}: port {settings.base.port} is in use: stop the production server first (the "
            "check starts its servers on the same GPUs and port, one at a time)"
        )
    if dry_run:
        _print_dry_run(plan, settings)
        return
    if store.exists(run_id) and "box_plan" not in store.manifest(run_id).parameters:
        raise ParameterError(
            f"--run-id {run_id}: a stored run that `box --verify` did not create (it holds no box plan): measure into "
            "a new run id; a check never writes into a run it did not make"
        )
    err_console.print(f"measuring into run {run_id} (resumable: the same --run-id continues)", highlight=False)
    run_verify(plan, settings, data_dir, run_id, progress=lambda line: err_console.print(line, highlight=False))
    runs: Runs = Evidence(data_dir).measured
    table = compare(runs, run_id)
    problems, refused = untrusted_cells(runs, run_id, table)
    table.loc[table["variant"].isin(refused), [c for c in table.columns if c.startswith("measured_")]] = float("nan")
    store.write_table(run_id, "box_verify", table)
    if table["measured_tokens_per_s"].notna().any():
        v = verdict(runs, run_id, table)
        console.print(
            f"measured at {v.load} streams: {v.winner} served the most goodput ({v.winner_goodput:.0f} tok/s); the "
            f"choice {v.chosen_goodput:.0f}, the runner-up {v.runner_up_goodput:.0f}",
            highlight=False,
            markup=False,
        )
        if not problems:
            console.print(
                "the model chose right" if v.model_right else f"the model chose wrongly: {v.winner} won, measured",
                highlight=False,
                markup=False,
            )
        console.print(
            f"predicted tok/s: median miss {v.median_error:.0%} over {v.measured_cells} of {v.planned_cells} cells",
            highlight=False,
        )
    if problems:
        raise CheckError(
            f"run {run_id}: the check cannot be trusted (no verdict on the model's choice): " + "; ".join(problems)
        )
