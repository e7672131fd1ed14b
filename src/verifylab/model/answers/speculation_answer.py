"""``verifylab model speculation``'s answer for any served model and GPU: where a public per-context matrix ran the box
(same GPUs, model shape, regime and chain), that matrix moved to the owner's context and accept length; else the
model, its all-reduces from a regime's or the owner's curve, calibrated to the owner's plain decoding."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from verifylab.errors import ModelInputError
from verifylab.model.answers.context_answer import anchored_answer, matching_matrix
from verifylab.model.answers.engine_answer import (
    Engine,
    EngineBands,
    EngineChoice,
    choice_for,
    engine_verify,
    matrix_pool,
    served_model,
)
from verifylab.model.answers.evidence_ladder import BandAnswer, transfer_band
from verifylab.model.case.speculation import inputs
from verifylab.model.fits.context import context_terms
from verifylab.model.fits.grid import box_overheads
from verifylab.model.fits.matrix_holdout import holdout_miss
from verifylab.model.inputs.configs import eagle3_draft_for, read_config
from verifylab.model.inputs.curves import Curve, load_curves
from verifylab.model.inputs.gpus import gpu_named, option_key
from verifylab.model.inputs.model_costs import ModelCosts, Routing
from verifylab.model.inputs.probes import probed_world
from verifylab.model.inputs.stored import stored_inputs, stored_runs
from verifylab.model.pricing.attention import DEFAULT_MEM_FRACTION
from verifylab.model.pricing.boxes import (
    calibrate_decode_on,
    fused_regime_curve,
    latency_curve,
    layout_fits,
    pcie_ipc_regime_curve,
    regime_curve,
)
from verifylab.model.pricing.pricer import Box
from verifylab.model.pricing.speculation import UNPHYSICAL, SpeculationAnswer, answer, check_accept, gain_flag
from verifylab.sources import ModelSources
from verifylab.vocab import REGIME_KEYS, Drafter, Regime

TRANSFERRED = "reported (public), transferred to your context and accept length"
ROUTINGS = tuple(r.value for r in Routing)  # what --routing may name
UNPHYSICAL_WORDS = UNPHYSICAL  # the line under a table with a gain past what its accept length can yield


def gpu_key(name: str) -> str:
    """``RTX_PRO_6000`` -> ``rtx-pro-6000``: the GPU table's key as ``--gpu`` spells it."""
    return option_key(name)


@dataclass(frozen=True)
class SpeculationAsk:
    """What the owner asks, parsed: the served model and its draft, the GPU (a key of the GPU table, its datasheet
    overridable), the layout and the curve its all-reduces take (a regime's or a stored or given one), the traffic."""

    config: Path | None  # None: the case study's Kimi-K2.5
    gpu: str
    tp: int
    drafter: Drafter
    draft_tokens: int
    accept: float | None
    streams: list[int]
    context: int
    mem_fraction: float | None  # None: a matched page's own pool, else the book's default
    routing: Routing
    regime: Regime | None = None
    latency: str | None = None
    path: str | None = None
    decode_tok_s: float | None = None
    draft_config: Path | None = None
    expert_bits: float | None = None
    bandwidth_gbs: float | None = None
    tflops: float | None = None
    engine: str = Engine.SGLANG.value
    attention_backend: str | None = None
    verify_kernel: str | None = None
    kv_cache_dtype: str | None = None
    shared_prefix: bool = False  # the streams share one prompt prefix: the pool holds it once, no cap
    pcie_ipc: bool = False  # the all-reduces on SGLang's PCIe-IPC all-reduce (as `box --plan` launches it), not NCCL
    fusion: bool = False  # the all-reduces on FlashInfer's fused all-reduce + RMSNorm (likewise), not NCCL


@dataclass(frozen=True)
class SpeculationReply:
    """The answer, the model it priced, where it came from, and (modelled only) whether the owner's decode rate fits
    the box's physics."""

    result: SpeculationAnswer
    target: ModelCosts
    provenance: str
    consistent: str | None
    decision: BandAnswer | None = None  # where a public matrix answers: the band the decision page gives this box
    choice: EngineChoice | None = None  # the engine, backend and KV dtype the answer priced (a launch line serves it)

    def checks(self, accept_high: float) -> list[str]:
        """Per row, why its gain is past what ``accept_high`` tokens per cycle can yield ("" where it is not)."""
        return [gain_flag(r.gain.high, accept_high) for r in self.result.rows]


def speculation_reply(ev: ModelSources, ask: SpeculationAsk) -> SpeculationReply:
    """The answer from the nearest evidence: the public matrix that ran this box where the owner gave nothing of
    their own box (no curve, decode rate or datasheet override) and a trained router, else the model."""
    runs = ev.measured
    target, raw = served_model(ask.config, ask.expert_bits)
    draft = read_config(ask.draft_config) if ask.draft_config else eagle3_draft_for(target)
    if (ask.tp > 1 or ask.regime or ask.latency) and (ask.regime is None) == (ask.latency is None):
        raise ModelInputError("give one of --regime (a regime's curve) or --latency (your box's curve)")
    if ask.accept is not None:  # on either path: a public matrix's transfer takes the owner's accept length too
        check_accept(ask.accept, ask.draft_tokens)
    gpu = gpu_named(ask.gpu, stored_runs(runs).ceilings, ask.bandwidth_gbs, ask.tflops)
    layout_fits(target, gpu, ask.tp)  # the same memory check as `box`
    if ask.pcie_ipc and (ask.regime is None or ask.tp == 1):
        raise ModelInputError("--pcie-ipc: give --tp above 1 and --regime (the PCIe-IPC curve is a regime's)")
    if ask.fusion and (ask.regime is None or ask.tp == 1 or ask.pcie_ipc):
        raise ModelInputError(
            "--fusion: give --tp above 1 and --regime (the fused curve is a regime's), not --pcie-ipc"
        )
    own_box = (  # nothing of the owner's own box, and the collective a public matrix ran (not PCIe-IPC nor fusion)
        ask.latency is None and ask.decode_tok_s is None and ask.bandwidth_gbs is None and ask.tflops is None
    ) and not (ask.pcie_ipc or ask.fusion)
    key = None if ask.regime is None else next(k for k, v in REGIME_KEYS.items() if v == ask.regime.value)
    matched = (
        matching_matrix(stored_inputs(ev), target, ask.gpu, ask.tp, key, ask.drafter, ask.draft_tokens)
        if own_box and ask.routing is Routing.UNIFORM
        else None
    )
    choice = choice_for(
        ask.engine,
        ask.attention_backend,
        ask.verify_kernel,
        ask.kv_cache_dtype,
        raw,
        ask.gpu,
        matched[0].kv_dtype if matched is not None else None,
    )
    if matched is not None:
        matrix, fit = matched
        growth, source = engine_verify(
            stored_runs(runs), choice, raw, ask.tp, target.layers, gpu, ask.gpu, float(matrix.anchor)
        )
        words = (choice.words(), source)
        drafted = draft if ask.drafter is Drafter.EAGLE3 else None
        pool = (
            None if ask.shared_prefix else matrix_pool(matrix, choice, target, drafted, gpu, ask.tp, ask.mem_fraction)
        )
        result = anchored_answer(matrix, fit, float(ask.context), ask.accept, ask.streams, growth, words, pool)
        provenance = TRANSFERRED if growth is None else f"{TRANSFERRED}, its verify priced as {choice.words()}"
        engine = EngineBands(choice.words(), growth, pool, holdout_miss(stored_inputs(ev)))
        decision = transfer_band(ask.context, matrix, fit, ask.accept, engine)
        return SpeculationReply(result, target, provenance, None, decision, choice)
    if ask.accept is None:
        asked_off = not own_box or ask.routing is not Routing.UNIFORM  # a matrix was not looked for: would one run it?
        ran = asked_off and matching_matrix(
            stored_inputs(ev), target, ask.gpu, ask.tp, key, ask.drafter, ask.draft_tokens
        )
        raise ModelInputError(
            f"--accept: give the mean accepted tokens per verify on your traffic ({_why_modelled(ask, bool(ran))})"
        )
    curve, comm_source, other = None, "TP 1: no all-reduce", None  # other: PCIe-IPC's or fusion's curve, asked
    if ask.regime is not None:
        curves = inputs(stored_inputs(ev)).curves
        other = pcie_ipc_regime_curve(curves, ask.regime, ask.tp, target.hidden) if ask.pcie_ipc else None
        if ask.fusion:  # as `box --plan` prices it: the regime's fused curve less the norm kernel it replaces
            other = fused_regime_curve(curves, ask.regime, ask.tp, inputs(stored_inputs(ev)).norm_us, target.hidden)
        if (ask.pcie_ipc or ask.fusion) and other is None:
            option, name = ("--fusion", "fusion") if ask.fusion else ("--pcie-ipc", "SGLang's PCIe-IPC all-reduce")
            raise ModelInputError(
                f"{option}: no curve prices {name} at {ask.tp} ranks with {ask.regime.value} (it needs working P2P; "
                "chapter 4's public curves)"
            )
        nccl_curve = regime_curve(curves, ask.regime, ask.tp)
        curve, comm_source = other if other is not None else nccl_curve
    elif ask.latency is not None:
        curve, comm_source = latency_curve(_owners_curves(ev, ask, target.hidden), ask.path)
    box = Box(
        target,
        gpu,
        tp=ask.tp,
        draft=draft if ask.drafter is Drafter.EAGLE3 else None,
        context=float(ask.context),
        attention=context_terms(stored_inputs(ev)),
        mem_fraction=ask.mem_fraction if ask.mem_fraction is not None else DEFAULT_MEM_FRACTION,
        routing=ask.routing,
        allreduce_us=curve,
        comm_source=comm_source,
    )
    box, overheads = box_overheads(stored_runs(runs), box)  # the nearest grid's (the box's own, where stored)
    rate_box = box if other is None else replace(box, allreduce_us=nccl_curve[0])  # the rate was measured on NCCL
    calibrated = calibrate_decode_on(box, rate_box, overheads, ask.decode_tok_s, "given (--decode-tok-s)")
    result = answer(box, calibrated, ask.drafter, ask.accept, ask.draft_tokens, ask.streams)
    result.inputs["engine"] = (
        f"{choice.words()}; modelled: attention priced by the fitted context terms above (a verify kernel re-prices "
        "a public matrix's transfer only)"
    )
    return SpeculationReply(result, target, "modelled", str(calibrated.consistent).lower(), choice=choice)


def _why_modelled(ask: SpeculationAsk, matrix_ran: bool) -> str:
    """Why no public matrix stands in for the owner's accept length: none ran the box, or one did and what the owner
    asked puts the answer on the model (an all-reduce it did not run, their own box's numbers, a router)."""
    if not matrix_ran:
        return "no stored public matrix ran this box, so none can stand in for it"
    asked = [
        name
        for name, given in (
            ("--pcie-ipc", ask.pcie_ipc),
            ("--fusion", ask.fusion),
            ("--latency", ask.latency is not None),
            ("--decode-tok-s", ask.decode_tok_s is not None),
            ("--bandwidth-gbs", ask.bandwidth_gbs is not None),
            ("--tflops", ask.tflops is not None),
            (f"--routing {ask.routing.value}", ask.routing is not Routing.UNIFORM),
        )
        if given
    ]
    return (
        f"a public matrix ran this box, but {' and '.join(asked)} asks the model, which prices speculation at the "
        "accept length you give; leave it out for the matrix's own answer"
    )


def public_reply(ev: ModelSources, ask: SpeculationAsk) -> SpeculationReply | None:
    """The answer whose band the decision page gives the box ``ask`` names (``model speculation``'s decision, with the
    engine choice it priced), where a public matrix ran it; None where none did. For an answer from the box's own
    numbers, to show beside it."""
    key = None if ask.regime is None else next((k for k, v in REGIME_KEYS.items() if v == ask.regime.value), None)
    if ask.regime is not None and key is None:
        return None  # a regime no public matrix is keyed on (a socket, an unknown one)
    if ask.routing is not Routing.UNIFORM or ask.latency is not None or ask.decode_tok_s is not None:
        return None
    target, _ = served_model(ask.config, ask.expert_bits)
    if matching_matrix(stored_inputs(ev), target, ask.gpu, ask.tp, key, ask.drafter, ask.draft_tokens) is None:
        return None
    return speculation_reply(ev, ask)


def _owners_curves(ev: ModelSources, ask: SpeculationAsk, hidden: int) -> list[Curve]:
    """The owner's ``--latency`` curves: a stored probe of ``--tp`` ranks (refused at another count), a stored run or a
    file."""
    runs, latency = ev.measured, str(ask.latency)
    if runs.exists(latency) and runs.table_or_none(latency, "verdict") is not None:
        world = probed_world(runs, latency)
        if world != ask.tp:
            raise ModelInputError(
                f"--latency {latency}: that probe measured {world} rank(s), not the {ask.tp} of --tp {ask.tp}: "
                f"probe {ask.tp} GPUs, or give --tp {world}"
            )
    return load_curves(latency, runs, ask.path, hidden)
