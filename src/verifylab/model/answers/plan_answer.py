"""``verifylab box --plan``'s answer: the owner's request typed (:class:`PlanRequest`), the box it describes priced
from the stored record (its probe, else the GPU, TP and regime named; a public per-context matrix's rates where one
ran this box), and the configuration with the most goodput under the SLO, with the runner-up (:func:`plan_box`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from verifylab.errors import ParameterError
from verifylab.model.answers.all_reduce_choice import LAUNCHED, choose_all_reduce, not_launched
from verifylab.model.answers.box_decision import BoxInputs, ProbedBox, probed_box
from verifylab.model.answers.box_plan import (
    DRAFT_TOKENS,
    BoxPlan,
    Priced,
    RateSource,
    Slo,
    choose,
    plan_streams,
    startup_seconds,
)
from verifylab.model.answers.context_answer import PoolCap, anchored_answer, matching_matrix, transfer_rates
from verifylab.model.answers.engine_answer import (
    SGLANG_KV_DTYPE,
    EngineBands,
    choice_for,
    engine_verify,
    matrix_pool,
    served_model,
)
from verifylab.model.answers.evidence_ladder import transfer_band
from verifylab.model.answers.probed_collective import probed_fusion, probed_pcie_ipc
from verifylab.model.case.options import NormCurve
from verifylab.model.case.speculation import inputs
from verifylab.model.fits.context import AttentionFit, VerifyGrowth
from verifylab.model.fits.grid import box_overheads
from verifylab.model.fits.in_pass import regime_curves
from verifylab.model.fits.matrix_holdout import holdout_miss
from verifylab.model.inputs.configs import (
    eagle3_draft_for,
    needs_remote_code,
    read_config,
)
from verifylab.model.inputs.context_matrix import ContextMatrix
from verifylab.model.inputs.gpus import gpu_named, option_key
from verifylab.model.inputs.model_costs import Routing
from verifylab.model.inputs.stored import StoredInputs, stored_inputs
from verifylab.model.pricing.attention import (
    BYTES_ONCE_PER_PASS,
    DEFAULT_MEM_FRACTION,
    AttentionTerms,
    kv_pool_tokens,
)
from verifylab.model.pricing.boxes import (
    calibrate_decode_on,
    fused_regime_curve,
    layout_fits,
    pcie_ipc_regime_curve,
    regime_curve,
)
from verifylab.model.pricing.collectives import RegimeCurves
from verifylab.model.pricing.pricer import NO_OVERLAP, AllreduceCurve, Box, Overheads
from verifylab.model.pricing.regimes import PRICED_REGIMES, Collective
from verifylab.model.pricing.verify_kernels import KV_DTYPE_BYTES
from verifylab.sources import MeasuredRuns, ModelSources
from verifylab.span import Span
from verifylab.vocab import RECOMMENDED_STACK, REGIME_KEYS, Drafter, Regime, regime_named

DEFAULT_ACCEPT = 2.0  # where neither the owner nor any evidence gives an accept length (said in the plan's inputs)


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
    overlap: Span | None  # None: the box's own grid's fitted overlap where one is stored, else 0
    prompt_tokens: int
    output_tokens: int
    budget_minutes: float
    expert_bits: float | None = None
    regime: str | None = None  # TP > 1 before the box is probed: price its all-reduces in this regime (public curves)
    probe: str | None = None  # a stored probe of the box: its TP, GPU and own all-reduce curve
    sglang: str = RECOMMENDED_STACK[0]  # the SGLang version the printed command is built for
    context: int | None = None  # tokens of KV a stream holds while it decodes (None: prompt + half the output)
    attention: AttentionTerms = BYTES_ONCE_PER_PASS  # attention over context (the evidence's terms, where stored)
    measured: bool = True  # the plan is to be measured (--verify): refused when it does not fit the budget
    tp_given: bool = False  # --tp was given (with --probe, it must be the probe's)
    engine: str = "sglang"  # the engine served: a public matrix's verify is re-priced for SGLang's kernel
    attention_backend: str | None = None  # SGLang's --attention-backend (None: its default for the shape and GPU)
    verify_kernel: str | None = None  # Triton's verify kernel (None: serial, SGLang's)
    kv_cache_dtype: str | None = None  # None: the matching matrix's, else bf16
    pcie_ipc: bool = False  # the SGLang named runs its PCIe-IPC all-reduce (its launch target says so)
    fusion: bool = False  # the SGLang named has a switch for FlashInfer's fused all-reduce + RMSNorm

    @property
    def decode_context(self) -> float:
        """The context a decoding stream attends over: the one given, else its prompt and half its output."""
        return float(self.context) if self.context is not None else self.prompt_tokens + self.output_tokens / 2


def _regime_of(text: str | None) -> Regime | None:
    """``--regime`` in either spelling (``healthy-p2p`` or ``healthy P2P``), refused in one line otherwise."""
    if text is None:
        return None
    try:
        return regime_named(text)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None


def plan_box(ev: ModelSources, req: PlanRequest) -> BoxPlan:
    """The plan for a box at TP ``req.tp``, from ``ev``'s record read once: TP 1 has no all-reduce; a larger TP
    prices its all-reduces in the named ``req.regime`` from the public and measured curves (modelled, before the box
    is probed). Where a public per-context matrix ran this box, the plan's rates are that matrix moved to the owner's
    context."""
    record = stored_inputs(ev)
    overlap = req.overlap if req.overlap is not None else NO_OVERLAP  # until the nearest grid says otherwise
    if req.gpu is not None:  # the table's key whatever its spelling: the public evidence is keyed on it
        req = replace(req, gpu=option_key(req.gpu))
    regime: Regime | None
    alternatives: dict[Collective, Box] = {}  # the all-reduces other than NCCL a curve prices, as boxes
    unpriced: list[str] = []  # the all-reduce line's clauses for those the SGLang named has and nothing prices here
    if req.probe is not None:  # the box as its probe measured it: its TP, GPU, regime and own all-reduce curve
        probed = _from_probe(ev.measured, req)
        if req.tp_given and req.tp != probed.box.tp:
            raise ParameterError(
                f"--tp {req.tp}: probe {req.probe} prices TP {probed.box.tp} (the ranks it measured, as its policy "
                f"allows): drop --tp, give --tp {probed.box.tp}, or probe {req.tp} GPUs"
            )
        box, regime, gpu_key = replace(probed.box, chain_overlap=overlap), probed.regime, probed.gpu_key
        # NCCL as the probe measured it; PCIe-IPC where P2P works (the probe's rule for what writes into peers) and
        # a curve prices it, fusion where the probe's policy allows it and it measured the fused kernel
        priced = {
            Collective.PCIE_IPC: probed_pcie_ipc(record, box, probed.policy.custom_allreduce) if req.pcie_ipc else None,
            Collective.FUSED: probed_fusion(record, box, probed.curves, probed.path, probed.policy)
            if req.fusion
            else None,
        }
        for c, got in priced.items():
            if isinstance(got, tuple):
                alternatives[c] = replace(box, allreduce_us=got[0], comm_source=got[1])
            elif got is not None and box.tp > 1:  # it cannot run or is not priced on this box: not launched, why
                unpriced.append(not_launched(c, got))
        target, raw = box.target, probed.config_fields  # the config as the probe's box read it
    else:
        if req.tp > 1 and req.regime is None:
            regimes = ", ".join(repr(r.value) for r in PRICED_REGIMES)
            raise ParameterError(f"--tp {req.tp}: name the box's communication regime with --regime ({regimes})")
        if req.gpu is None:
            raise ParameterError(
                "--gpu: name the box's GPU (h200, h100, rtx-pro-6000), or give --probe RUN of the box: a plan never "
                "assumes one"
            )
        gpu_key = req.gpu
        target, raw = served_model(req.config, req.expert_bits)
        gpu = gpu_named(gpu_key, record.runs.ceilings)
        layout_fits(target, gpu, req.tp)
        curve, comm, others = None, "TP 1: no all-reduce", {}
        regime = _regime_of(req.regime)
        if req.tp > 1 and regime is not None:
            if regime not in PRICED_REGIMES:
                raise ParameterError(f"--regime {req.regime!r}: one of {', '.join(r.value for r in PRICED_REGIMES)}")
            # the reported regime's curve is the case study's pass less its priced compute: only it needs the account
            curves = inputs(record).curves if regime is Regime.DEGRADED else regime_curves(record)
            curve, comm = regime_curve(curves, regime, req.tp)
            others = _regime_alternatives(req, record, curves, regime, target.hidden, unpriced)
            # NCCL is the all-reduce SGLang runs unless told (PCIe-IPC and fusion are opt-in): where the SGLang named
            # has another and a curve prices it, the plan launches it where it prices more goodput, and says which
        modelled = " (modelled: the box is not probed)" if req.tp > 1 else ""
        box = Box(
            target,
            gpu,
            tp=req.tp,
            draft=read_config(req.draft_config) if req.draft_config else eagle3_draft_for(target),
            context=req.decode_context,
            attention=req.attention,
            mem_fraction=DEFAULT_MEM_FRACTION,
            routing=Routing.UNIFORM,
            chain_overlap=overlap,
            allreduce_us=curve,
            comm_source=comm + modelled,
        )
        for c, (priced_curve, source) in others.items():
            alternatives[c] = replace(box, allreduce_us=priced_curve, comm_source=source + modelled)
    # the nearest grid's overheads, and its fitted overlap unless one was stated
    box, overheads = box_overheads(record.runs, box, req.overlap is not None)
    alternatives = {c: replace(b, chain_overlap=box.chain_overlap) for c, b in alternatives.items()}
    gpu, draft, tp = box.gpu, box.draft, box.tp
    matched = None
    if req.decode_tok_s is None:
        key = next((k for k, v in REGIME_KEYS.items() if regime is not None and v == regime.value), None)
        matched = matching_matrix(record, target, gpu_key, tp, key, Drafter.EAGLE3, req.draft_tokens)
    choice = choice_for(
        req.engine,
        req.attention_backend,
        req.verify_kernel,
        req.kv_cache_dtype,
        raw,
        gpu_key,
        matched[0].kv_dtype if matched is not None else None,
    )
    verify: tuple[VerifyGrowth | None, str] = (None, "")
    if matched is not None:  # the verify and the pool the decision page's band for this box assumes: one rule
        verify = engine_verify(record.runs, choice, raw, tp, target.layers, gpu, gpu_key, float(matched[0].anchor))
        pool = matrix_pool(matched[0], choice, target, draft, gpu, tp)
    else:
        tokens = kv_pool_tokens(target, draft, gpu, tp, DEFAULT_MEM_FRACTION, kv_bytes=KV_DTYPE_BYTES[choice.kv_dtype])
        pool = PoolCap(tokens, f"at {DEFAULT_MEM_FRACTION:g} of each GPU's memory, KV {choice.kv_dtype}")
    cap = pool.streams(req.decode_context)
    engine = EngineBands(choice.words(), verify[0], pool, holdout_miss(record)) if matched is not None else None
    nccl_box = box  # the rate given (--decode-tok-s) was measured on SGLang's default all-reduce
    box, collective, other, other_on = _collective(req, box, alternatives, overheads, matched, cap)
    box = replace(box, comm_source="; ".join((box.comm_source, *unpriced)))  # and what the SGLang has, unpriced
    plan = _plan(req, box, overheads, matched, verify[0], cap, engine, rate_box=nccl_box, other=other)
    engine_inputs = {"engine": choice.words()} | ({"verify": verify[1]} if verify[0] is not None else {})
    return replace(
        plan,
        collective=LAUNCHED[collective],  # launched as priced
        other_on=LAUNCHED[other_on] if other_on is not None else "",
        attention_backend=choice.backend if choice.launch_refusal is None else None,
        launch_refusal=choice.launch_refusal,
        trust_remote_code=needs_remote_code(raw),
        kv_cache_dtype=SGLANG_KV_DTYPE.get(choice.kv_dtype),
        inputs={
            **plan.inputs,
            **engine_inputs,
            "kv pool": f"{pool.tokens:,} tokens ({pool.source}): {cap:,} distinct streams of "
            f"{req.decode_context:,.0f} tokens"
            + (f" (the load and the sweep capped at {cap})" if cap < max(plan_streams(req.load)) else ""),
        },
        context_tokens=req.context,
        stream_cap=cap,
    )


def _regime_alternatives(
    req: PlanRequest, record: StoredInputs, curves: RegimeCurves, regime: Regime, hidden: int, unpriced: list[str]
) -> dict[Collective, tuple[AllreduceCurve, str]]:
    """The all-reduces other than NCCL the SGLang named has that the regime's curves price at ``req.tp`` ranks;
    each it has that they cannot price is said in ``unpriced``."""
    priced: dict[Collective, tuple[AllreduceCurve, str]] = {}
    if req.pcie_ipc:
        ipc = pcie_ipc_regime_curve(curves, regime, req.tp, hidden)
        if ipc is None:
            unpriced.append(not_launched(Collective.PCIE_IPC, f"no curve prices it here at {req.tp} ranks"))
        else:
            priced[Collective.PCIE_IPC] = ipc
    if req.fusion:
        norm = record.runs.norm
        norm_us = None if norm is None else NormCurve(norm.tokens, norm.us)
        fused = None if norm_us is None else fused_regime_curve(curves, regime, req.tp, norm_us, hidden)
        if fused is None:  # why, as the regime's curves say it
            why = curves.price(regime, Collective.FUSED, req.tp, req.tp * 2.0**14) if norm is not None else ""
            unpriced.append(not_launched(Collective.FUSED, str(why) or "no run measured the norm kernel it replaces"))
        else:
            priced[Collective.FUSED] = fused
    return priced


MATRIX_RATES = (
    "the table's rates are the public matrix's, which ran one all-reduce and cannot tell them apart: the choice among "
    "them is the model's"
)


def _collective(
    req: PlanRequest,
    nccl_box: Box,
    alternatives: dict[Collective, Box],
    overheads: Overheads,
    matched: tuple[ContextMatrix, AttentionFit] | None,
    stream_cap: int,
) -> tuple[Box, Collective, Priced | None, Collective | None]:
    """The all-reduce the plan launches where the SGLang named offers more than NCCL (its default): its PCIe-IPC
    all-reduce and FlashInfer's fusion, where a curve prices each (``alternatives``), by one rule
    (:func:`~verifylab.model.answers.all_reduce_choice.choose_all_reduce`); and the all-reduce that ties it, whose
    best configuration ``--verify`` measures too. Modelled, also where a public matrix gives the plan's rates: they
    were measured on one all-reduce and do not tell them apart. The all-reduce line says why."""
    if not alternatives:
        return nccl_box, Collective.NCCL, None, None
    accept = req.accept if req.accept is not None or matched is None else matched[0].accept.mid
    ask = replace(req, accept=accept, measured=False)  # only to choose: the plan below is the one measured
    boxes = {Collective.NCCL: nccl_box, **alternatives}
    best = {c: _plan(ask, b, overheads, stream_cap=stream_cap, rate_box=nccl_box).chosen for c, b in boxes.items()}
    choice = choose_all_reduce(best)
    launched = boxes[choice.launched]
    matrix = () if matched is None or not choice.clauses else (MATRIX_RATES,)  # the table's numbers are not these
    source = "; ".join((launched.comm_source, *choice.clauses, *matrix))
    too = choice.measured_too
    return replace(launched, comm_source=source), choice.launched, None if too is None else best[too], too


def _from_probe(runs: MeasuredRuns, req: PlanRequest) -> ProbedBox:
    """The box its stored probe measured (TP as its policy allows, its own NCCL curve) at the plan's context."""
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
        context=req.decode_context,
        attention=req.attention,
    )
    return probed_box(runs, inputs)


def _plan(
    req: PlanRequest,
    box: Box,
    overheads: Overheads,
    matched: tuple[ContextMatrix, AttentionFit] | None = None,
    verify: VerifyGrowth | None = None,
    stream_cap: int | None = None,
    engine: EngineBands | None = None,
    rate_box: Box | None = None,
    other: Priced | None = None,
) -> BoxPlan:
    """Choose on ``box`` with the nearest grid's ``overheads``, calibrated to the owner's decode rate if given (on
    ``rate_box``, the box on the all-reduce the rate was measured on, where ``box`` runs another); with ``matched``
    evidence, on its rates at the owner's context (its chain only; prefill stays modelled)."""
    target, gpu = box.target, box.gpu
    calibrated = calibrate_decode_on(box, rate_box or box, overheads, req.decode_tok_s, "given (--decode-tok-s)")
    evidence: dict[str, str] = {}
    accept = req.accept if req.accept is not None else DEFAULT_ACCEPT
    rates: RateSource | None = None
    chains: tuple[int, ...] = DRAFT_TOKENS
    if matched is not None:
        matrix, fit = matched
        rates = transfer_rates(matrix, fit, box.context, own_accept=req.accept is None, verify=verify)
        chains = (matrix.verify_tokens,)
        answer = anchored_answer(matrix, fit, box.context, req.accept, matrix.streams, verify)
        accept = req.accept if req.accept is not None else (matrix.accept.low + matrix.accept.high) / 2
        band = transfer_band(int(box.context), matrix, fit, req.accept, engine) if engine is not None else None
        evidence = {
            "evidence": answer.inputs["evidence"],
            "transfer": answer.inputs["transfer"],
            "speculation": (band.setting if band is not None else "not decided")
            + f" at {box.context:g} tokens of context (EAGLE-3, {matrix.verify_tokens} tokens per verify, accept "
            + (f"{req.accept:g}" if req.accept is not None else f"{matrix.accept.text(2)}: the page's own")
            + (
                f"; the decision page's band, widened by the transfers' out-of-sample miss {band.widened:.0%})"
                if band is not None
                else ")"
            ),
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
        refuse_over_budget=req.measured,
        stream_cap=stream_cap,
        other_collective=other,
    )
    inputs = {
        "model": target.name,
        "gpu": f"{gpu.name} x {box.tp}",
        "all-reduce": box.comm_source,
        "weights": target.quantization,
        "context": f"{box.context:g} tokens of KV per decoding stream",
        **evidence,
        "routing overlap": f"{box.chain_overlap.text(2)} of a chain's tokens share experts",
        "host overhead": calibrated.host_note if matched is None else "in the evidence's own rates",
        **({"drafting overhead": f"per speculative cycle, {overheads.source}"} if matched is None else {}),
        **plan.inputs,
    }
    return replace(plan, inputs=inputs, tp=box.tp)
