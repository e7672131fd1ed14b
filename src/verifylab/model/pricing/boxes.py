"""A box as the pricer takes it: one all-reduce's curve by message (a regime's range, a fused or PCIe-IPC curve, a probe
or a file), the memory check of a layout, and its host overhead calibrated to its own plain decode rate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from verifylab.errors import ModelInputError
from verifylab.model.inputs.curves import Curve
from verifylab.model.inputs.gpus import Gpu
from verifylab.model.inputs.model_costs import ModelCosts
from verifylab.model.pricing.collectives import RegimeCurves
from verifylab.model.pricing.pricer import AllreduceCurve, Box, Overheads, price_pass, price_step, scenarios
from verifylab.model.pricing.regimes import REGIME_TITLE, Collective, InPassFactor, Price, pcie_ipc_holds
from verifylab.span import Span
from verifylab.vocab import BF16_BYTES, KIMI_K2_HIDDEN, SGLANG_FUSION_MAX_TOKENS, Regime

CURVE_NAMES = {Collective.NCCL: "NCCL all-reduce", Collective.PCIE_IPC: "PCIe-IPC all-reduce"}


# A box's all-reduce by message is a value, not a closure: the interactive commands keep derived boxes on disk.
@dataclass(frozen=True)
class PricedCollective:
    """One all-reduce's range on ``collective`` at ``world`` ranks in ``regime``, by message bytes."""

    curves: RegimeCurves
    regime: Regime
    world: int
    collective: Collective
    hidden: int = KIMI_K2_HIDDEN  # the served model's (PCIe-IPC counts its workspace in rows): the case study's

    def __call__(self, message: float) -> Span:
        price = self.curves.price(self.regime, self.collective, self.world, message, self.hidden)
        if not isinstance(price, Price):
            raise ModelInputError(f"{REGIME_TITLE.get(self.regime, self.regime.value)} at {self.world} ranks: {price}")
        return Span(price.low_us, price.high_us)


class FusedPrices(Protocol):
    """Where a fused all-reduce + RMSNorm is priced: a regime's curves, or a probed box's own fused curve."""

    def price(
        self, regime: Regime, collective: Collective, world: int, message: float, hidden: int = ...
    ) -> Price | str: ...


@dataclass(frozen=True)
class FusedLessNorm:
    """The fused all-reduce + RMSNorm less the norm kernel it replaces; ``nccl`` above SGLang's fusion limit."""

    curves: FusedPrices
    regime: Regime
    world: int
    norm_us: Callable[[float], float]
    hidden: int
    nccl: AllreduceCurve

    def __call__(self, message: float) -> Span:
        tokens = message / (self.hidden * BF16_BYTES)
        price = self.curves.price(self.regime, Collective.FUSED, self.world, message)
        if tokens > SGLANG_FUSION_MAX_TOKENS or not isinstance(price, Price):
            return self.nccl(message)
        norm = self.norm_us(tokens)
        return Span(price.low_us - norm, price.high_us - norm)


@dataclass(frozen=True)
class MeasuredCurve:
    """A measured NCCL curve by message (one value, no range)."""

    curve: Curve

    def __call__(self, message: float) -> Span:
        us = self.curve.at(message)
        return Span(us, us)


def regime_curve(
    curves: RegimeCurves,
    regime: Regime,
    world: int,
    collective: Collective = Collective.NCCL,
    hidden: int = KIMI_K2_HIDDEN,
) -> tuple[AllreduceCurve, str]:
    """One all-reduce's range on ``collective`` (NCCL or PCIe-IPC, each from its own curve) at ``world`` ranks in
    ``regime``, by message bytes, for a model of ``hidden`` size; refused where the regime has no curve at that size
    of group."""
    at = PricedCollective(curves, regime, world, collective, hidden)
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
    at = FusedLessNorm(curves, regime, world, norm_us, hidden, nccl)
    return at, (
        f"FlashInfer fused all-reduce + RMSNorm, {REGIME_TITLE.get(regime, regime.value)}, {world} ranks, less the "
        "norm kernel it replaces (chapter 4's curves)"
    )


def pcie_ipc_regime_curve(
    curves: RegimeCurves, regime: Regime, world: int, hidden: int
) -> tuple[AllreduceCurve, str] | None:
    """SGLang's PCIe-IPC all-reduce at ``world`` ranks in ``regime`` for a model of ``hidden`` size (None where it
    cannot run or has no curve)."""
    try:
        return regime_curve(curves, regime, world, Collective.PCIE_IPC, hidden)
    except ModelInputError:
        return None


@dataclass(frozen=True)
class PcieIpcOverBoxNccl:
    """SGLang's PCIe-IPC all-reduce on a probed box whose P2P works: its public curve where the workspace holds the
    reduction, this box's own NCCL (as its probe measured it) past it, where SGLang hands the reduction to NCCL."""

    pcie_ipc: AllreduceCurve
    nccl: AllreduceCurve
    hidden: int  # the served model's: the workspace is counted in its rows

    def __call__(self, message: float) -> Span:
        return self.pcie_ipc(message) if pcie_ipc_holds(message, self.hidden) else self.nccl(message)


def probed_pcie_ipc_curve(
    curves: RegimeCurves, world: int, hidden: int, nccl: AllreduceCurve, nccl_source: str
) -> tuple[AllreduceCurve, str] | None:
    """SGLang's PCIe-IPC all-reduce at ``world`` ranks on a probed box whose P2P works (its NCCL may be slow), with
    ``nccl`` (the probe's curve) past the workspace; None where no public curve prices PCIe-IPC at ``world`` ranks."""
    ipc = pcie_ipc_regime_curve(curves, Regime.HEALTHY_P2P, world, hidden)
    if ipc is None:
        return None
    return PcieIpcOverBoxNccl(ipc[0], nccl, hidden), (
        f"{ipc[1]}: P2P works on this box (its probe), the box was not measured on it; past the decode-sized "
        f"workspace SGLang hands the reduction to NCCL: {nccl_source}"
    )


@dataclass(frozen=True)
class ProbedFused:
    """A probed box's own fused curve times the fused kernel's factor inside a pass, priced as a regime's curves
    price it (whatever the regime and ranks asked: the box's)."""

    fused: Curve
    in_pass: InPassFactor

    def price(self, regime: Regime, collective: Collective, world: int, message: float, hidden: int = 0) -> Price:
        us = self.fused.at(message)
        low, high = self.in_pass.range_at(message)
        return Price(us * low, us * high, f"measured on this box: {self.fused.source}", (low, high))


def probed_fused_curve(
    curves: RegimeCurves, fused: Curve, norm_us: Callable[[float], float], hidden: int, nccl: AllreduceCurve
) -> tuple[AllreduceCurve, str]:
    """The probed box's fused all-reduce + RMSNorm as one layer's all-reduce costs a pass with fusion on (the
    verify pass's rule of `box --probe`'s fusion answer), its NCCL past SGLang's fusion limit."""
    at = FusedLessNorm(ProbedFused(fused, curves.in_pass_fused), Regime.MEASURED, 0, norm_us, hidden, nccl)
    return at, (
        f"FlashInfer fused all-reduce + RMSNorm on {fused.path}, as this box's probe measured it ({fused.source}), "
        f"times the fused kernel's factor inside a pass ({curves.in_pass_fused.source()}), less the norm kernel it "
        f"replaces; NCCL past {SGLANG_FUSION_MAX_TOKENS} tokens"
    )


def latency_curve(curves: list[Curve], path: str | None) -> tuple[AllreduceCurve, str]:
    """The NCCL curve of ``path`` among measured curves (a probe's run, a CSV, nccl-tests output)."""
    nccl = [c for c in curves if c.impl == "nccl" and (path is None or c.path == path)]
    if not nccl:
        have = ", ".join(sorted({c.path for c in curves if c.impl == "nccl"})) or "none"
        raise ModelInputError(f"--latency: no NCCL curve{f' on path {path!r}' if path else ''} (NCCL paths: {have})")
    if len(nccl) > 1:
        raise ModelInputError(f"--latency holds NCCL curves on {', '.join(c.path for c in nccl)}: pick one with --path")
    curve = nccl[0]
    return MeasuredCurve(curve), f"NCCL all-reduce on {curve.path}, {curve.source}"


DECODE_TOK_S = (0.1, 1e5)  # one stream of plain decoding: slower than a step in ten seconds is no server; faster


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
    ones = [price_pass(box, box.target, 1, 1, s, decode=True) for s in scenarios(box)]
    rest = [step - one.physics_ms - one.collectives_ms - measured.host1_ms for one in ones]
    consistent = max(rest) >= 0
    host0 = Span(max(min(rest), 0.0), max(max(rest), 0.0))
    note = f"set so that one stream decodes at {decode_tok_s:g} tok/s ({source})"
    if not consistent:
        note += ": faster than this box's bytes and all-reduces allow, so the all-reduce curve is too slow for it"
    return Calibrated(replace(measured, host0_ms=host0, decode_ms=step), note, consistent)


def calibrate_decode_on(
    box: Box, rate_box: Box, measured: Overheads, decode_tok_s: float | None, source: str
) -> Calibrated:
    """:func:`calibrate_decode` for ``box`` where the rate was measured on ``rate_box``, the same box on another
    all-reduce (NCCL, SGLang's default): calibrated there and its host overhead carried over, so that ``box``'s
    collective keeps its saving (or its cost) instead of having it absorbed."""
    if decode_tok_s is None or rate_box is box:
        return calibrate_decode(box, measured, decode_tok_s, source)
    return carried_host(rate_box, calibrate_decode(rate_box, measured, decode_tok_s, source))


def carried_host(box: Box, calibrated: Calibrated) -> Calibrated:
    """``calibrated``'s host overhead as a fixed range (its ends over ``box``'s scenarios), for a box that decodes
    on another collective than the one the rate was measured on: the collective's saving must not be absorbed."""
    ov = calibrated.overheads
    host0 = [price_step(box, ov, 1, s).host_pass_ms for s in scenarios(box)]
    return Calibrated(
        replace(ov, host0_ms=Span(min(host0), max(host0)), decode_ms=None),
        calibrated.host_note + "; carried over from plain decoding on NCCL",
        calibrated.consistent,
    )


def layout_fits(target: ModelCosts, gpu: Gpu, tp: int) -> None:
    """Refuse a layout whose weights alone exceed one GPU's memory, naming the GB needed and there."""
    need = target.weights_bytes(tp)
    if need > gpu.memory_bytes:
        raise ModelInputError(
            f"{target.name} ({target.quantization}) at TP {tp} needs {need / 1e9:.0f} GB of weights per GPU; a "
            f"{gpu.name} holds {gpu.memory_bytes / 1e9:.0f} GB: more GPUs, or a narrower quantization"
        )
