"""The decision for one box, from its own numbers: its probe (regime, all-reduce curve, which paths were right, the
policy), its plain decoding rate, the served model's config and the accept length of its traffic. Each question is
answered from those numbers with the same model the book uses for the case study: fusion on or off (the verify pass's
all-reduces and norms against the fused kernel, from the box's own curves), speculation up to how many streams (the
speculation model with the box's curve and calibrated to its decode rate), the launch command the policy allows, and
what to fix first. Modelled from measured inputs; every input is named."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifylab.comm.policy import Policy, policy_from_probe
from verifylab.comm.verdict import whole_set
from verifylab.errors import ModelInputError
from verifylab.launch import AllReduce, LaunchError, LaunchTarget, SglangLaunch, build_command
from verifylab.model.answers.box_switch import SPECULATION_SUMMARY, Switch, banded_speculation, modelled_speculation
from verifylab.model.answers.engine_answer import SGLANG_KV_DTYPE, EngineChoice, choice_for, served_model
from verifylab.model.answers.evidence_ladder import BandAnswer
from verifylab.model.answers.probed_collective import (
    all_reduce_words,
    fusion_refused,
    pcie_ipc_missing,
    probed_pcie_ipc,
)
from verifylab.model.answers.speculation_answer import SpeculationAsk, SpeculationReply, public_reply
from verifylab.model.fits.grid import box_overheads
from verifylab.model.fits.in_pass import fused_in_pass_fit
from verifylab.model.inputs.configs import eagle3_draft_for, needs_remote_code, read_config
from verifylab.model.inputs.curves import Curve, load_curves, norm_us_measured
from verifylab.model.inputs.gpus import gpu_key, gpu_named, option_key
from verifylab.model.inputs.model_costs import Routing
from verifylab.model.inputs.stored import stored_inputs, stored_runs
from verifylab.model.pricing.attention import BYTES_ONCE_PER_PASS, DEFAULT_MEM_FRACTION, AttentionTerms
from verifylab.model.pricing.boxes import calibrate_decode, checked_decode_rate, latency_curve, layout_fits
from verifylab.model.pricing.pass_cost import compare
from verifylab.model.pricing.pricer import Box, Overheads, price_verify, scenarios
from verifylab.model.pricing.speculation import DEFAULT_STREAMS, SpeculationAnswer, answer
from verifylab.sources import MeasuredRuns, ModelSources
from verifylab.span import Span
from verifylab.vocab import Drafter, Regime

FUSION_STREAMS = (1, 8, 32)  # the verify pass priced with and without fusion at these stream counts


@dataclass(frozen=True)
class BoxInputs:
    """What the owner gives, or what `verifylab box` measured: the probe run and the serving numbers."""

    probe_run: str
    decode_tok_s: float
    decode_source: str  # "measured: ..." or "given (--decode-tok-s)"
    accept: float
    draft_tokens: int = 4
    config: Path | None = None  # the served model's config.json; None: the case study's Kimi-K2.5
    gpu: str | None = None  # h200, h100, rtx-pro-6000; None: from the probe's GPU name
    model_path: str = "<model-path>"
    draft_path: str = "<EAGLE-3-draft-path>"
    draft_config: Path | None = None  # the EAGLE-3 draft's config.json; None: the usual one-layer shape
    routing: Routing = Routing.UNIFORM  # collapsed: random weights fed identical tokens (a mechanics server)
    context: float = 2048.0  # tokens of KV each stream attends over
    expert_bits: float | None = None  # the routed experts' width; None: what the config's quantization_config says
    target: LaunchTarget | None = None  # the SGLang the launch command is built for (None: no command)
    attention: AttentionTerms = BYTES_ONCE_PER_PASS  # attention over context (the evidence's terms, where stored)
    accept_stated: bool = True  # False: ``accept`` is the default, and a public matrix's own accept length stands
    engine: str = "sglang"  # the engine served (a public matrix's verify is re-priced for it)
    attention_backend: str | None = None  # SGLang's --attention-backend (None: its default for the shape and GPU)
    verify_kernel: str | None = None  # Triton's verify kernel (None: serial, SGLang's)
    kv_cache_dtype: str | None = None  # None: the matching matrix's, else bf16

    def __post_init__(self) -> None:
        checked_decode_rate(self.decode_tok_s, "decode rate")
        if not 1.0 <= self.accept <= self.draft_tokens:
            raise ModelInputError(
                f"--accept {self.accept!r}: mean accepted tokens per verify, from 1 to --draft-tokens "
                f"({self.draft_tokens})"
            )


@dataclass(frozen=True)
class FusionPrice:
    """What fusion saves on one verify pass at ``streams`` (ms; negative: it costs), or why it is not priced."""

    streams: int
    tokens: int
    saving_ms: Span | None
    note: str = ""


@dataclass(frozen=True)
class BoxDecision:
    """Every answer for one box, and what each was computed from."""

    run_id: str
    label: str
    world: int
    regime: Regime
    allreduce_us: float | None
    reason: str
    fix_first: str
    fix_evidence: str
    band: str
    policy: Policy
    rank_map: list[dict]
    model: str
    gpu: str
    fusion: list[FusionPrice]
    fusion_setting: Switch
    fusion_answer: str
    speculation: SpeculationAnswer
    speculation_setting: Switch
    speculation_answer: str
    gain_one_stream: Span
    launch_command: str
    inputs: dict[str, str] = field(default_factory=dict)
    speculation_band: BandAnswer | None = None  # the public band EAGLE-3's answer is, where one ran this box
    all_reduce_answer: str = ""  # NCCL, and where PCIe-IPC is priced the command that chooses (empty at TP 1)

    def finding(self) -> str:
        """The page's one-line finding, from the settings (never read back from their words)."""
        return (
            f"{self.world} x {self.gpu}: {self.regime.value}. Fusion {self.fusion_setting.value}; EAGLE-3 "
            f"{SPECULATION_SUMMARY[self.speculation_setting]}. Fix first: {self.fix_first}"
        )


def _text(value: object) -> str:
    """A table cell as text: an empty cell (NaN, None) is an empty string."""
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def stored_decode_rate(runs: MeasuredRuns, run_id: str) -> tuple[float, str] | None:
    """The plain decode rate `verifylab box` measured with this probe (its ``box_decode`` table), with its source."""
    table = runs.table_or_none(run_id, "box_decode") if runs.exists(run_id) else None
    if table is None or table.empty:
        return None
    when = ""
    if "measured_at" in table.columns and table["measured_at"].notna().any():  # several: the newest speaks
        newest = str(table["measured_at"].dropna().max())
        table, when = table[table["measured_at"] == newest], f" at {newest}"
    tpot = float(table["tpot_ms"].median())
    return 1e3 / tpot, (
        f"measured: run {run_id}'s box_decode{when}, {len(table)} requests, median {tpot:.2f} ms per token"
    )


def _probe(runs: MeasuredRuns, run_id: str) -> tuple[dict, list[dict], Policy, str, str]:
    """The whole set's verdict row, the rank map, the policy (as ``policy.json`` beside the run says it), the run's
    label and GPU name."""
    if not runs.exists(run_id):
        raise ModelInputError(f"--probe {run_id}: no such run in {runs.where}")
    verdict = runs.table_or_none(run_id, "verdict")
    if verdict is None or verdict.empty:
        raise ModelInputError(f"--probe {run_id}: not a communication probe (no verdict table)")
    whole = whole_set(verdict)
    rank_map = runs.table_or_none(run_id, "rank_map")
    run = runs.run(run_id)
    rows = [] if rank_map is None else rank_map.to_dict("records")
    latency = runs.read_table(run_id, "allreduce_latency")
    policy = policy_from_probe(run_id, verdict, latency, dict(run.parameters.get("nccl_environment") or {}))
    return whole.iloc[0].to_dict(), rows, policy, run.label, run.gpu_name or ""


def _fusion(
    runs: MeasuredRuns, curves: list[Curve], path: str, box: Box, ov: Overheads, policy: Policy, k: int
) -> tuple[list[FusionPrice], Switch, str]:
    """Fusion's saving per verify pass: the box's verify pass on its own NCCL curve against the same pass with each
    all-reduce on its own fused curve (times the fused kernel's in-pass factor) less the norm kernel the fused kernel
    does; with the policy's reason where it cannot run."""
    refused = fusion_refused(policy)
    if refused is not None:
        prices = [FusionPrice(c, c * k, None, f"fusion off: {refused}") for c in FUSION_STREAMS]
        return prices, Switch.OFF, f"off: {refused}"
    by_impl = {c.impl: c for c in curves if c.path == path}
    if "fused" not in by_impl or "nccl" not in by_impl:
        unmeasured = [FusionPrice(c, c * k, None, "no fused curve in the probe") for c in FUSION_STREAMS]
        return unmeasured, Switch.NOT_PRICED, "not measured"
    fit = fused_in_pass_fit(stored_runs(runs))
    prices = []
    for streams in FUSION_STREAMS:
        tokens = streams * k
        message = tokens * box.target.hidden * 2
        norm = norm_us_measured(runs, tokens)
        if norm is None:
            prices.append(FusionPrice(streams, tokens, None, "no measured norm kernel in the store"))
            continue
        nccl = price_verify(box, ov, k, streams, scenarios(box)[0])
        n = box.allreduces_per_pass(box.target)
        saved = [
            compare(
                nccl, nccl.with_collectives(n * (by_impl["fused"].at(message) * f - norm[0]) / 1e3, "fused")
            ).saved_ms
            for f in fit.range_at(message)
        ]
        prices.append(FusionPrice(streams, tokens, Span.of(*saved)))
    one = prices[0].saving_ms
    if one is None:
        return prices, Switch.NOT_PRICED, "not priced"
    if one.low > 0:
        return prices, Switch.ON, f"on: it saves {one.text(2)} ms per verify pass at one stream"
    if one.high < 0:
        return prices, Switch.OFF, f"off: it costs {Span(-one.high, -one.low).text(2)} ms per verify pass at one stream"
    return (
        prices,
        Switch.MEASURE,
        f"not resolved: {one.text(2)} ms per verify pass at one stream (measure it on this box)",
    )


def box_launch(
    inputs: BoxInputs, policy: Policy, fusion_on: bool, speculate: bool, choice: EngineChoice, config: dict[str, Any]
) -> SglangLaunch:
    """What the policy allows, with fusion and EAGLE-3 where they pay (placeholders for paths not given): its TP, its
    custom all-reduce, the variables it unsets; the all-reduce, attention backend and KV dtype its answers were priced
    on (``choice``), and remote code where the served model's ``config`` names it."""
    tp = policy.world if policy.tensor_parallel else 1
    serves = choice.launch_refusal is None  # vLLM's prices (its backend in words) or an unreleased kernel: no command
    settings = {
        "model_path": inputs.model_path,
        "tp_size": tp,
        "attention_backend": choice.backend if serves else None,
        "kv_cache_dtype": SGLANG_KV_DTYPE.get(choice.kv_dtype) if serves else None,
        "trust_remote_code": needs_remote_code(config),
        "allreduce": AllReduce.FUSED if fusion_on else AllReduce.NCCL,
        "disable_custom_all_reduce": tp > 1 and not policy.custom_allreduce,
        "unset_env": tuple(policy.unset),
    }
    if speculate:
        return SglangLaunch.speculative("EAGLE3", inputs.draft_tokens, inputs.draft_path, **settings)
    return SglangLaunch(**settings)


def _launch_command(inputs: BoxInputs, launch: SglangLaunch, refusal: str | None = None) -> str:
    """``launch`` built for the target SGLang, quoted for the shell; why not, where it cannot be."""
    if refusal is not None:
        return f"no command: {refusal}"
    if inputs.target is None:
        return "no command: no SGLang version to build it for (give --sglang)"
    try:
        return build_command(launch, inputs.target).shell()
    except LaunchError as exc:
        return f"no command: {exc}"


@dataclass(frozen=True)
class ProbedBox:
    """A box as its probe measured it: the verdict, rank map, policy and label, the latency curves and the path
    they were read on, and the box the speculation model prices (its TP as the policy allows, its own curve)."""

    verdict: dict
    rank_map: list[dict]
    policy: Policy
    label: str
    curves: list[Curve]
    path: str
    box: Box
    gpu_key: str  # the GPU table's key (``rtx-pro-6000``): what the public evidence is keyed on
    regime: Regime
    config_fields: dict[str, Any]  # the served model's config.json, as read once for ``box.target``


def probed_box(runs: MeasuredRuns, inputs: BoxInputs) -> ProbedBox:
    """The box of ``inputs.probe_run``: its served model (refused when its weights do not fit the GPUs), its GPU,
    its TP and its own all-reduce curve."""
    verdict, rank_map, policy, label, gpu_name = _probe(runs, inputs.probe_run)
    world = int(verdict["world"])
    target, raw = served_model(inputs.config, inputs.expert_bits)
    names = {str(r.get("name") or "") for r in rank_map} - {""}
    key = option_key(inputs.gpu) if inputs.gpu else gpu_key(next(iter(names), gpu_name))
    gpu = gpu_named(key, stored_runs(runs).ceilings)
    layout_fits(target, gpu, world if policy.tensor_parallel else 1)
    path = str(verdict["transport"])
    curves: list[Curve] = []
    curve, comm_source = None, "TP 1: no all-reduce"
    if world > 1:
        curves = load_curves(inputs.probe_run, runs, None, target.hidden)
        curve, comm_source = latency_curve(curves, path)
    box = Box(
        target,
        gpu,
        tp=world if policy.tensor_parallel else 1,
        draft=read_config(inputs.draft_config) if inputs.draft_config else eagle3_draft_for(target),
        context=inputs.context,
        attention=inputs.attention,
        mem_fraction=DEFAULT_MEM_FRACTION,
        routing=inputs.routing,
        allreduce_us=curve if policy.tensor_parallel else None,
        comm_source=comm_source + f" (this box: run {inputs.probe_run})",
    )
    return ProbedBox(verdict, rank_map, policy, label, curves, path, box, key, Regime(str(verdict["regime"])), raw)


def _public_reply(ev: ModelSources, inputs: BoxInputs, probed: ProbedBox) -> SpeculationReply | None:
    """The decision page's band for this box (its model, GPU key, TP, regime, chain and context) and the engine choice
    it priced, where a public matrix ran it: speculation's nearest evidence, the probe measuring none of its own."""
    ask = SpeculationAsk(
        config=inputs.config,
        gpu=probed.gpu_key,
        tp=probed.box.tp,
        drafter=Drafter.EAGLE3,
        draft_tokens=inputs.draft_tokens,
        accept=inputs.accept if inputs.accept_stated else None,
        streams=list(DEFAULT_STREAMS),
        context=int(inputs.context),
        mem_fraction=None,
        routing=inputs.routing,
        regime=probed.regime if probed.box.tp > 1 else None,
        draft_config=inputs.draft_config,
        expert_bits=inputs.expert_bits,
        engine=inputs.engine,
        attention_backend=inputs.attention_backend,
        verify_kernel=inputs.verify_kernel,
        kv_cache_dtype=inputs.kv_cache_dtype,
    )
    return public_reply(ev, ask)


def decide_box(ev: ModelSources, inputs: BoxInputs, streams: tuple[int, ...] = DEFAULT_STREAMS) -> BoxDecision:
    """The decision for the box ``inputs.probe_run`` measured: EAGLE-3 from the decision page's band where a public
    matrix ran this box (the model on the box's own numbers beside it), else from that model."""
    runs = ev.measured
    probed = probed_box(runs, inputs)
    verdict, rank_map, policy, label, box = probed.verdict, probed.rank_map, probed.policy, probed.label, probed.box
    curves, path, target = probed.curves, probed.path, box.target
    regime, world = Regime(str(verdict["regime"])), int(verdict["world"])
    box, overheads = box_overheads(stored_runs(runs), box)  # the nearest grid's (the box's own, where stored)
    calibrated = calibrate_decode(box, overheads, inputs.decode_tok_s, inputs.decode_source)
    spec = answer(box, calibrated, Drafter.EAGLE3, inputs.accept, inputs.draft_tokens, streams)
    one = spec.rows[0].gain
    fusion, fusion_setting, fusion_answer = _fusion(
        runs, curves, path, box, calibrated.overheads, policy, inputs.draft_tokens
    )
    spec_setting, spec_answer = modelled_speculation(spec, calibrated.consistent, inputs.decode_tok_s)
    reply = _public_reply(ev, inputs, probed)
    band = reply.decision if reply is not None else None
    choice = (  # the engine, backend and KV dtype the answer priced: the band's matrix's where one answers
        reply.choice
        if reply is not None and reply.choice is not None
        else choice_for(
            inputs.engine,
            inputs.attention_backend,
            inputs.verify_kernel,
            inputs.kv_cache_dtype,
            probed.config_fields,
            probed.gpu_key,
            None,
        )
    )
    refusal = choice.launch_refusal  # vLLM's prices, or a kernel no released SGLang runs: no SGLang command
    if band is not None:
        spec_setting, spec_answer = banded_speculation(band, spec_answer)
    missing = pcie_ipc_missing(inputs.engine, inputs.target)
    # as `box --plan --probe` prices it, where the SGLang named has it
    ipc = missing if missing is not None else probed_pcie_ipc(stored_inputs(ev), box, policy.custom_allreduce)
    us = verdict.get("allreduce_us")
    return BoxDecision(
        run_id=inputs.probe_run,
        label=label,
        world=world,
        regime=regime,
        allreduce_us=float(us) if us is not None and us == us else None,
        reason=str(verdict["reason"]),
        fix_first=_text(verdict["fix_hypothesis"]),
        fix_evidence=_text(verdict.get("fix_evidence")),
        band=_text(verdict.get("band")),
        policy=policy,
        rank_map=rank_map,
        model=target.name,
        gpu=box.gpu.name,
        fusion=fusion,
        fusion_setting=fusion_setting,
        fusion_answer=fusion_answer,
        speculation=spec,
        speculation_setting=spec_setting,
        speculation_answer=spec_answer,
        gain_one_stream=one,
        launch_command=_launch_command(
            inputs,
            box_launch(
                inputs, policy, fusion_setting is Switch.ON, spec_setting is Switch.ON, choice, probed.config_fields
            ),
            refusal,
        ),
        speculation_band=band,
        all_reduce_answer=all_reduce_words(inputs.probe_run, ipc, fusion_setting is Switch.ON) if box.tp > 1 else "",
        inputs={
            **spec.inputs,
            "probe": f"run {inputs.probe_run} ({label})",
            "decode": f"{inputs.decode_tok_s:g} tok/s at one stream ({inputs.decode_source})",
            "accept": f"{inputs.accept:g} tokens per verify, {inputs.draft_tokens} draft tokens",
            "weights": target.quantization,
            "engine": choice.words(),
        },
    )
