"""The case study's box as the speculation model prices it, per communication regime: its cycle account and the
inputs every option is priced from, plain decoding calibrated to the reported rate, and EAGLE-3 on NCCL, with
FlashInfer's fusion, or on SGLang's PCIe-IPC all-reduce (:class:`SpeculationCase`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from verifylab.derived import derived
from verifylab.model.case.box import CASE_CONTEXT, CASE_GPUS, case_study_box
from verifylab.model.case.cycle import cycle_account
from verifylab.model.case.options import ModelInputs, model_inputs
from verifylab.model.fits.context import context_terms
from verifylab.model.fits.grid import measured_overheads
from verifylab.model.fits.overlap import fitted_overlap
from verifylab.model.inputs.stored import StoredInputs
from verifylab.model.pricing.boxes import (
    Calibrated,
    calibrate_decode,
    carried_host,
    checked_decode_rate,
    fused_regime_curve,
    pcie_ipc_regime_curve,
)
from verifylab.model.pricing.pricer import AllreduceCurve, Box
from verifylab.model.pricing.regimes import REGIME_TITLE, Collective, decode_regime
from verifylab.model.pricing.speculation import DEFAULT_STREAMS, SpeculationAnswer, answer, combined_crossover, gains
from verifylab.reported import reported_value
from verifylab.span import Span
from verifylab.vocab import KIMI_K2_HIDDEN, Drafter, Regime


def inputs(stored: StoredInputs) -> ModelInputs:
    """What every option is priced from, with the record's own account (built once per evidence)."""
    return model_inputs(stored, cycle_account(stored))


@dataclass(frozen=True)
class SpeculationCase:
    """EAGLE-3 against plain decoding on the case study's box in one regime (TP 8, NCCL), over the draft-token range:
    the gain per stream count, where it falls below 1, and every input named."""

    regime: Regime
    by_draft_tokens: dict[int, SpeculationAnswer]
    crossover: tuple[float | None, float | None]  # pessimistic, optimistic (None: beyond the streams priced)
    consistent: bool  # False: the box's reported decode rate is faster than this regime allows
    accept: float
    box: Box
    calibrated: Calibrated

    def throughput(self, streams: tuple[int, ...] = DEFAULT_STREAMS) -> pd.DataFrame:
        """Plain decoding and EAGLE-3 at each stream count: total and per-user tok/s as ranges over the draft-token
        range and every input's range (the Pareto view of this box, modelled)."""
        rows = []
        for c in streams:
            found = [
                row
                for k in self.by_draft_tokens
                for row in gains(self.box, self.calibrated.overheads, Drafter.EAGLE3, self.accept, k, [c])
            ]
            for decoding, spans in (
                ("plain decoding", [r.plain_tokens_per_s for r in found]),
                ("EAGLE-3", [r.spec_tokens_per_s for r in found]),
            ):
                low, high = min(x.low for x in spans), max(x.high for x in spans)
                rows.append(
                    {
                        "regime": REGIME_TITLE[self.regime],
                        "decoding": decoding,
                        "streams": c,
                        "total_tokens_per_s_low": low,
                        "total_tokens_per_s_high": high,
                        "per_user_tokens_per_s_low": low / c,
                        "per_user_tokens_per_s_high": high / c,
                    }
                )
        return pd.DataFrame(rows)

    def plain_at(self, streams: int) -> Span:
        """Plain decoding's tok/s (all streams) at ``streams`` over every input's range: the same for every draft-token
        count."""
        rows = [
            gains(self.box, self.calibrated.overheads, Drafter.EAGLE3, self.accept, k, [streams])[0]
            for k in self.by_draft_tokens
        ]
        return Span(min(r.plain_tokens_per_s.low for r in rows), max(r.plain_tokens_per_s.high for r in rows))

    def gain_at(self, streams: int) -> Span:
        """EAGLE-3's gain at ``streams`` over the draft-token range and every input's range."""
        rows = [
            row
            for k in self.by_draft_tokens
            for row in gains(self.box, self.calibrated.overheads, Drafter.EAGLE3, self.accept, k, [streams])
        ]
        return Span(min(r.gain.low for r in rows), max(r.gain.high for r in rows))


@derived
def speculation_case(stored: StoredInputs) -> dict[Regime, SpeculationCase]:
    """The case study's box per regime: calibrated to its reported plain decode rate, EAGLE-3 at its reported
    accept length, with the overheads measured on the H200 speculation grid (built once per evidence)."""
    return speculation_cases(stored, inputs(stored), *decode_rate(stored))


def decode_rate(stored: StoredInputs, given_tok_s: float | None = None) -> tuple[float, str]:
    """Plain decoding at one stream that EAGLE-3's gain is calibrated to, and its source: the reader's own rate
    when given, else the case study's reported one."""
    if given_tok_s is None:
        return reported_value(stored.figures, "baseline_92_6"), "reported plain decoding, seed 002"
    return checked_decode_rate(given_tok_s, "--decode-tok-s"), "given (--decode-tok-s)"


@derived
def fused_speculation_case(stored: StoredInputs) -> dict[Regime, SpeculationCase | None]:
    """The case study's box per regime with FlashInfer's fusion on for the target's verify passes, calibrated and
    drafted as :func:`speculation_case` (None: fusion cannot run in that regime)."""
    return cases_on(stored, inputs(stored), *decode_rate(stored), collective=Collective.FUSED)


@derived
def pcie_ipc_speculation_case(stored: StoredInputs) -> dict[Regime, SpeculationCase | None]:
    """The case study's box per regime with SGLang's PCIe-IPC all-reduce for every TP all-reduce (target and draft,
    plain decoding included), calibrated as :func:`speculation_case` (None: it cannot run in that regime)."""
    return cases_on(stored, inputs(stored), *decode_rate(stored), collective=Collective.PCIE_IPC)


def speculation_cases(
    stored: StoredInputs, model: ModelInputs, decode_tps: float, decode_source: str, context: float = CASE_CONTEXT
) -> dict[Regime, SpeculationCase]:
    """The case study's model per regime of ``model``'s curves, calibrated to ``decode_tps`` (plain decoding at one
    stream, from ``decode_source``): EAGLE-3 at the reported accept length over the draft-token range, each stream
    holding ``context`` tokens."""
    return {r: case for r, case in cases_on(stored, model, decode_tps, decode_source, context=context).items() if case}


def cases_on(
    stored: StoredInputs,
    model: ModelInputs,
    decode_tps: float,
    decode_source: str,
    collective: Collective = Collective.NCCL,
    context: float = CASE_CONTEXT,
) -> dict[Regime, SpeculationCase | None]:
    """The case study's box per regime of ``model``'s curves with the verify passes' all-reduces on ``collective``,
    calibrated to ``decode_tps`` as :func:`speculation_cases` (None where the collective cannot run)."""
    a, curves = model.account, model.curves
    measured = measured_overheads(stored.runs)
    overlap = case_overlap(stored)
    out: dict[Regime, SpeculationCase | None] = {}
    for regime in curves.regimes():
        curve = None if collective is Collective.NCCL else _verify_curve(model, regime, collective)
        if collective is not Collective.NCCL and curve is None:
            out[regime] = None
            continue
        terms = context_terms(stored)
        box = replace(
            case_study_box(curves, stored.runs.ceilings, regime, decode_regime(regime), curve, collective, terms),
            chain_overlap=overlap,
            context=context,
        )
        nccl_box = (
            box
            if curve is None
            else replace(
                case_study_box(curves, stored.runs.ceilings, regime, decode_regime(regime), attention=terms),
                context=context,
            )
        )
        cal = calibrate_decode(nccl_box, measured, decode_tps, decode_source)  # the rate was measured on NCCL
        if collective is Collective.PCIE_IPC:  # plain decoding runs on it too
            cal = carried_host(nccl_box, cal)
        answers = {k: answer(box, cal, Drafter.EAGLE3, a.accept_reported, k) for k in a.draft_tokens}
        crossover = combined_crossover(answers.values())
        out[regime] = SpeculationCase(regime, answers, crossover, cal.consistent, a.accept_reported, box, cal)
    return out


def case_overlap(stored: StoredInputs) -> Span:
    """The routing overlap of the case study's verify chains: the range fitted on the public curves of other models
    (:func:`verifylab.model.public_speculation.fitted_overlap`); 0 (every token its own experts) where none is
    stored."""
    fit = fitted_overlap(stored)
    return Span(0.0, 0.0) if fit is None else fit.span


def _verify_curve(model: ModelInputs, regime: Regime, collective: Collective) -> tuple[AllreduceCurve, str] | None:
    """The fused or PCIe-IPC curve of the case study's box in ``regime`` (None: it cannot run there)."""
    if collective is Collective.FUSED:
        return fused_regime_curve(model.curves, regime, CASE_GPUS, model.norm_us, KIMI_K2_HIDDEN)
    return pcie_ipc_regime_curve(model.curves, regime, CASE_GPUS, KIMI_K2_HIDDEN)
