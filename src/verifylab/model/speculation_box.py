"""A box for the speculation model: its all-reduce curve (a regime's range, a probe or a file), its host overhead
calibrated from its own plain decode rate, and the overheads measured on the H200 grid; and the case study's box
(Kimi-K2.5 INT4, eight RTX PRO 6000, TP 8) priced that way per regime."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from verifylab.errors import ModelInputError
from verifylab.model.comm_pass import LatencyCurve
from verifylab.model.cycle import Span
from verifylab.model.model_config import ModelCosts, Routing, costs_from_config, kimi_k25_costs
from verifylab.model.regimes import REGIME_TITLE, Collective, Price, RegimeCurves
from verifylab.model.speculation import (
    AllreduceCurve,
    Box,
    GainRow,
    Overheads,
    comm_ms,
    crossover_range,
    gains,
    gpu_named,
    host0_ms,
    physics_ms,
    scenarios,
)
from verifylab.model.speculation_inputs import FIT_ACCEPT, first_grid_fit, measured_ceilings
from verifylab.sources import MeasuredRuns
from verifylab.vocab import BF16_BYTES, SGLANG_FUSION_MAX_TOKENS, Drafter, Regime

CASE_GPUS = 8
CASE_CONTEXT = 2048  # tokens of KV per stream (chapter 4's options use the same)
DEFAULT_STREAMS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)


CURVE_NAMES = {Collective.NCCL: "NCCL all-reduce", Collective.PCIE_IPC: "PCIe-IPC all-reduce"}


def regime_curve(
    curves: RegimeCurves, regime: Regime, world: int, collective: Collective = Collective.NCCL
) -> tuple[AllreduceCurve, str]:
    """One all-reduce's range on ``collective`` (NCCL or PCIe-IPC, each from its own curve) at ``world`` ranks in
    ``regime``, by message bytes; refused where the regime has no curve at that size of group."""

    def at(message: float) -> Span:
        price = curves.price(regime, collective, world, message)
        if not isinstance(price, Price):
            raise ModelInputError(f"{REGIME_TITLE.get(regime, regime.value)} at {world} ranks: {price}")
        return Span(price.low_us, price.high_us)

    at(world * 2.0**14)  # refuse now, not in the middle of a table
    where = f"{REGIME_TITLE.get(regime, regime.value)}, {world} ranks (chapter 4's curves)"
    return at, f"{CURVE_NAMES[collective]}, {where}"


def fused_regime_curve(
    curves: RegimeCurves, regime: Regime, world: int, norm_us: Callable[[float], float], hidden: int
) -> tuple[AllreduceCurve, str] | None:
    """FlashInfer's fused all-reduce + RMSNorm at ``world`` ranks in ``regime`` as one layer's all-reduce costs a
    pass with fusion on: the fused kernel less the norm kernel it replaces (the unfused path's norm is in the
    calibrated host overhead), NCCL above SGLang's fusion token limit. None where fusion cannot run there."""
    nccl, _ = regime_curve(curves, regime, world)
    if not isinstance(curves.price(regime, Collective.FUSED, world, world * 2.0**14), Price):
        return None

    def at(message: float) -> Span:
        tokens = message / (hidden * BF16_BYTES)
        price = curves.price(regime, Collective.FUSED, world, message)
        if tokens > SGLANG_FUSION_MAX_TOKENS or not isinstance(price, Price):
            return nccl(message)
        norm = norm_us(tokens)
        return Span(price.low_us - norm, price.high_us - norm)

    return at, (
        f"FlashInfer fused all-reduce + RMSNorm, {REGIME_TITLE.get(regime, regime.value)}, {world} ranks, less the "
        "norm kernel it replaces (chapter 4's curves)"
    )


def pcie_ipc_regime_curve(curves: RegimeCurves, regime: Regime, world: int) -> tuple[AllreduceCurve, str] | None:
    """SGLang's PCIe-IPC all-reduce at ``world`` ranks in ``regime`` (None where it cannot run or has no curve)."""
    try:
        return regime_curve(curves, regime, world, Collective.PCIE_IPC)
    except ModelInputError:
        return None


def latency_curve(curves: list[LatencyCurve], path: str | None) -> tuple[AllreduceCurve, str]:
    """The NCCL curve of ``path`` among measured curves (a probe's run, a CSV, nccl-tests output)."""
    nccl = [c for c in curves if c.impl == "nccl" and (path is None or c.path == path)]
    if not nccl:
        have = ", ".join(sorted({c.path for c in curves if c.impl == "nccl"})) or "none"
        raise ModelInputError(f"--latency: no NCCL curve{f' on path {path!r}' if path else ''} (NCCL paths: {have})")
    if len(nccl) > 1:
        raise ModelInputError(f"--latency holds NCCL curves on {', '.join(c.path for c in nccl)}: pick one with --path")
    curve = nccl[0]

    def at(message: float) -> Span:
        us = curve.at(message)
        return Span(us, us)

    return at, f"NCCL all-reduce on {curve.path}, {curve.source}"


DECODE_TOK_S = (0.1, 1e5)  # one stream of plain decoding: slower than a step in ten seconds is no server; faster
# than 100k tok/s is no model


def checked_decode_rate(value: float, name: str) -> float:
    """``value`` as one stream's plain decode rate (tok/s), or one line naming ``name`` and the bounds."""
    low, high = DECODE_TOK_S
    if not (isinstance(value, int | float) and low <= value <= high):
        raise ModelInputError(f"{name} {value!r}: one stream's plain decode rate in tok/s, {low:g}..{high:g}")
    return float(value)


@dataclass(frozen=True)
class Calibrated:
    """Overheads for a box, and how its host overhead was set."""

    overheads: Overheads
    host_note: str
    consistent: bool  # False: the box decodes faster than its physics and all-reduces allow


def calibrate_decode(box: Box, measured: Overheads, decode_tok_s: float | None, source: str) -> Calibrated:
    """The H200 grid's overheads with ``host0`` set so that one stream decodes at ``decode_tok_s`` on this box
    (over every end of the box's ranges); unchanged when no rate is given."""
    if decode_tok_s is None:
        return Calibrated(measured, f"host overhead of the measured H200 run ({measured.source})", True)
    step = 1e3 / checked_decode_rate(decode_tok_s, "--decode-tok-s")
    rest = [
        step - physics_ms(box, box.target, 1, 1, s) - comm_ms(box, box.target, 1, s, decode=True) - measured.host1_ms
        for s in scenarios(box)
    ]
    consistent = max(rest) >= 0
    host0 = Span(max(min(rest), 0.0), max(max(rest), 0.0))
    note = f"set so that one stream decodes at {decode_tok_s:g} tok/s ({source})"
    if not consistent:
        note += ": faster than this box's bytes and all-reduces allow, so the all-reduce curve is too slow for it"
    return Calibrated(replace(measured, host0_ms=host0, decode_ms=step), note, consistent)


def carried_host(box: Box, calibrated: Calibrated) -> Calibrated:
    """``calibrated``'s host overhead as a fixed range (its ends over ``box``'s scenarios), for a box that decodes
    on another collective than the one the rate was measured on: the collective's saving must not be absorbed."""
    ov = calibrated.overheads
    host0 = [host0_ms(box, ov, s) for s in scenarios(box)]
    return Calibrated(
        replace(ov, host0_ms=Span(min(host0), max(host0)), decode_ms=None),
        calibrated.host_note + "; carried over from plain decoding on NCCL",
        calibrated.consistent,
    )


def eagle3_draft_for(target: ModelCosts, draft_vocab: int = 32000) -> ModelCosts:
    """An EAGLE-3 draft of the usual shape for ``target``: one Llama layer of the target's hidden size (heads of
    128, eight KV heads), an MLP 2.5 x hidden wide, a draft vocabulary of ``draft_vocab``."""
    heads = max(target.hidden // 128, 1)
    return costs_from_config(
        {
            "_name_or_path": f"EAGLE-3 draft for {target.name} (assumed shape)",
            "hidden_size": target.hidden,
            "num_hidden_layers": 1,
            "num_attention_heads": heads,
            "num_key_value_heads": min(8, heads),
            "head_dim": 128,
            "intermediate_size": int(2.5 * target.hidden),
            "vocab_size": draft_vocab,
        },
        "EAGLE-3 draft",
    )


def measured_overheads(runs: MeasuredRuns) -> Overheads:
    """The overheads fitted on the first stored speculation grid (host per stream, each drafter's per cycle)."""
    fit = first_grid_fit(runs)
    if fit is not None:
        return fit.overheads
    raise ModelInputError(
        f"no speculation grid under {runs.where} holds plain decoding and a sweep at accept length {FIT_ACCEPT:g}: "
        "run chapter 02 live with its speculation grid first"
    )


@dataclass(frozen=True)
class SpeculationAnswer:
    """One box's answer: the rows, where the gain falls below 1, and what every input was."""

    rows: list[GainRow]
    crossover: tuple[float | None, float | None]
    inputs: dict[str, str]


def answer(
    box: Box, calibrated: Calibrated, drafter: Drafter, accept: float, draft_tokens: int, streams=DEFAULT_STREAMS
) -> SpeculationAnswer:
    rows = gains(box, calibrated.overheads, drafter, accept, draft_tokens, streams)
    inputs = {
        "model": box.target.name,
        "draft": box.draft.name if box.draft is not None else "none (n-gram)",
        "gpu": f"{box.gpu.name}: {box.gpu.bandwidth_gbs.text(0)} GB/s, {box.gpu.tflops.text(0)} TFLOP/s "
        f"({box.gpu.source})",
        "tp": str(box.tp),
        "routing": box.routing.value,
        "routing_overlap": f"{box.chain_overlap.text(2)} (0: each token of a verify chain draws its own experts; "
        "1: the chain reads one token's)",
        "context_tokens": f"{box.context:g}",
        "allreduce": box.comm_source,
        "host_overhead": calibrated.host_note,
        "drafter_overhead": f"{drafter.value}: fitted on a measured speculation grid ({calibrated.overheads.source})",
    }
    return SpeculationAnswer(rows, crossover_range(rows), inputs)


def combined_crossover(answers: Iterable[SpeculationAnswer]) -> tuple[float | None, float | None]:
    """Several answers' crossovers as one range: the earliest any pessimistic curve falls below 1, the latest any
    optimistic one does (None: one of them never does within the streams priced)."""
    crossovers = [a.crossover for a in answers]
    lows = [low for low, _ in crossovers if low is not None]
    highs = [high for _, high in crossovers]
    return (min(lows) if lows else None, None if None in highs else max(h for h in highs if h is not None))


def case_study_box(
    curves: RegimeCurves,
    runs: MeasuredRuns,
    regime: Regime,
    decode_regime: Regime,
    verify: tuple[AllreduceCurve, str] | None = None,
    collective: Collective = Collective.NCCL,
) -> Box:
    """The case study's box: Kimi-K2.5 (INT4 experts) over eight RTX PRO 6000 at TP 8, its verify pass's
    all-reduces priced in ``regime`` (``verify``: another collective's curve and source), its plain decoding's in
    ``decode_regime``. Fusion covers the target's layers only (the draft stays on NCCL, and so does plain
    decoding, the baseline); the PCIe-IPC all-reduce replaces the group's every all-reduce."""
    target = kimi_k25_costs()
    nccl, source = regime_curve(curves, regime, CASE_GPUS)
    verify_curve, source = verify or (nccl, source)
    decode, _ = regime_curve(curves, decode_regime, CASE_GPUS)
    draft = nccl
    if collective is Collective.PCIE_IPC:
        draft = verify_curve
        decode = (pcie_ipc_regime_curve(curves, decode_regime, CASE_GPUS) or (decode, ""))[0]
    gpu = gpu_named("rtx-pro-6000", measured_ceilings(runs))
    return Box(
        target,
        gpu,
        tp=CASE_GPUS,
        draft=eagle3_draft_for(target),
        context=CASE_CONTEXT,
        routing=Routing.UNIFORM,
        allreduce_us=verify_curve,
        decode_allreduce_us=decode,
        draft_allreduce_us=draft,
        comm_source=source
        + (f"; plain decoding's in {REGIME_TITLE[decode_regime]}" if decode_regime != regime else ""),
    )
