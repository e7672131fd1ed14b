"""The case study as the model sees it: the cycle account, its inputs, the reconciliation and the options per
regime, each from one :class:`~verifylab.store.evidence.ModelSources`."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from verifylab.derived import derived
from verifylab.model.cycle import CycleAccount, Span, cycle_account
from verifylab.model.floors import INT4_BYTES_PER_WEIGHT, QUANTIZATION_SOURCE, RTX_PRO_6000_BLACKWELL_GBS
from verifylab.model.option_tables import options_table
from verifylab.model.options import CONTEXT_TOKENS, ModelInputs, model_inputs
from verifylab.model.reconcile import reconcile
from verifylab.model.regimes import REGIME_TITLE, BoxProbe, Collective, decode_regime
from verifylab.model.speculation import AllreduceCurve, Box, gains
from verifylab.model.speculation_box import (
    CASE_GPUS,
    DEFAULT_STREAMS,
    Calibrated,
    SpeculationAnswer,
    answer,
    calibrate_decode,
    carried_host,
    case_study_box,
    checked_decode_rate,
    combined_crossover,
    fused_regime_curve,
    measured_overheads,
    pcie_ipc_regime_curve,
)
from verifylab.sources import ModelSources, reported_value
from verifylab.vocab import KIMI_K2_HIDDEN, Drafter, Regime, allreduce_message_bytes


def account(ev: ModelSources) -> CycleAccount:
    """The cycle account of this evidence (built once per evidence)."""
    return cycle_account(ev)


def inputs(ev: ModelSources) -> ModelInputs:
    """What every option is priced from, with this evidence's own account (built once per evidence)."""
    return model_inputs(ev, account(ev))


@derived
def whatif_table(ev: ModelSources, batch: int = 1) -> pd.DataFrame:
    """Every option in every regime at ``batch`` streams: verify ms and tok/s as ranges (modelled)."""
    return options_table(inputs(ev), batch)


def options_at_loads(ev: ModelSources, loads: tuple[int, ...]) -> pd.DataFrame:
    """Every option in every regime at each of ``loads`` streams — verify ms and one stream's tok/s as ranges,
    the floor under them, and whether SGLang runs the option with EAGLE-3 (modelled)."""
    rows = []
    for streams in loads:
        for r in whatif_table(ev, streams).itertuples():
            priced = not pd.isna(r.verify_ms_low)
            rows.append(
                {
                    "regime": r.regime,
                    "option": r.option,
                    "streams": streams,
                    "verify (ms)": Span(r.verify_ms_low, r.verify_ms_high).text(1) if priced else "—",
                    "tok/s per stream": Span(r.tokens_per_s_low, r.tokens_per_s_high).text(0) if priced else "—",
                    "floor (ms)": Span(r.floor_ms_low, r.floor_ms_high).text(1),
                    "all-reduces": r.allreduces_per_pass,
                    "with EAGLE-3 in SGLang": r.eagle3_in_sglang.split(":")[0].split(" (")[0],
                    "not priced because": r.not_priced,
                }
            )
    return pd.DataFrame(rows)


def inputs_for_box(ev: ModelSources, box: BoxProbe) -> ModelInputs:
    """This evidence's inputs with ``box`` as the reader's own box (its curve prices the row 'this box'), in
    place of the newest stored 8-GPU probe."""
    base = inputs(ev)
    curves = replace(base.curves, box=box, notes=dict(base.curves.notes))
    return replace(base, curves=curves)


def reconcile_table(ev: ModelSources) -> pd.DataFrame:
    """The reconciliation of the reported figures, every number from the cycle account."""
    return reconcile(ev, account(ev), inputs(ev))


def inputs_table(ev: ModelSources) -> pd.DataFrame:
    """Every input of the account and the options with its value and where it came from."""
    a, m = account(ev), inputs(ev)
    low, high, _ = m.curves.reported_allreduce or (0.0, 0.0, 0.0)
    bw_low, bw_high = m.curves.bus_bandwidth_gbs
    fused_low, fused_high = m.curves.in_pass_fused.range_at(allreduce_message_bytes(1))
    rows = [
        ("verify pass", f"{a.verify_ms:.0f} ms", "reported (seed 000)"),
        ("all-reduce time in it / compute", f"{a.allreduce_ms:.0f} ms / {a.compute_ms:.0f} ms", "reported (seed 000)"),
        ("all-reduces per pass", f"{a.allreduces}", "reported (seed 000)"),
        ("accept length, drafter rate", f"{a.accept_reported:.1f} at {a.drafter_tps:.0f} tok/s", "reported (seed 000)"),
        ("draft phase per cycle", a.text("draft_ms"), "modelled: the 60 tok/s cycle less the 30 ms verify pass"),
        ("EAGLE-3 before the jump", a.text("before_tps"), "reported (seeds 001 and 002)"),
        ("draft tokens per verify", f"{a.draft_tokens[0]}-{a.draft_tokens[1]}", "assumption (not reported)"),
        ("norm kernel per all-reduce", a.text("norm_us"), a.norm_source),
        ("peak memory bandwidth", f"{RTX_PRO_6000_BLACKWELL_GBS:.0f} GB/s", "reported: NVIDIA datasheet"),
        ("expert weights", f"{INT4_BYTES_PER_WEIGHT:.4f} bytes per weight", f"assumption: {QUANTIZATION_SOURCE}"),
        ("KV context per stream", f"{CONTEXT_TOKENS} tokens", "assumption (stated)"),
        ("compute efficiency vs floor", f"{m.best_efficiency:.0%} at best", f"measured: {m.efficiency_source}"),
        ("one all-reduce as reported", f"{low:.0f}-{high:.0f} µs", "modelled: the 30 ms pass less its compute range"),
        ("NCCL bus bandwidth, 8 ranks", f"{bw_low:.1f}-{bw_high:.1f} GB/s", "reported (public)"),
        ("one GPU's P2P link", f"{m.curves.link_gbs:.0f} GB/s", "reported (public)"),
        (
            "fused kernel inside a pass",
            f"{fused_low:.2f}-{fused_high:.2f} x isolated at one token's message",
            f"modelled: {m.curves.notes.get('in_pass_fused', '')}",
        ),
        ("host-memory curve", f"run {m.curves.host_run}", "measured (2 x H200, NCCL_P2P_DISABLE=1): the low end"),
        (
            "host-memory bandwidth on SM120",
            f"{m.curves.sm120_host_gbs:g} GB/s",
            "reported (public, 2 x RTX 5070 Ti, NCCL SHM): the high end",
        ),
    ]
    return pd.DataFrame(rows, columns=["input", "value", "source"])


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
def speculation_case(ev: ModelSources) -> dict[Regime, SpeculationCase]:
    """The case study's box per regime: calibrated to its reported plain decode rate, EAGLE-3 at its reported
    accept length, with the overheads measured on the H200 speculation grid (built once per evidence)."""
    return speculation_cases(ev, inputs(ev), *decode_rate(ev))


def decode_rate(ev: ModelSources, given_tok_s: float | None = None) -> tuple[float, str]:
    """Plain decoding at one stream that EAGLE-3's gain is calibrated to, and its source: the reader's own rate
    when given, else the case study's reported one."""
    if given_tok_s is None:
        return reported_value(ev.figures, "baseline_92_6"), "reported plain decoding, seed 002"
    return checked_decode_rate(given_tok_s, "--decode-tok-s"), "given (--decode-tok-s)"


@derived
def fused_speculation_case(ev: ModelSources) -> dict[Regime, SpeculationCase | None]:
    """The case study's box per regime with FlashInfer's fusion on for the target's verify passes, calibrated and
    drafted as :func:`speculation_case` (None: fusion cannot run in that regime)."""
    return _cases(ev, inputs(ev), *decode_rate(ev), collective=Collective.FUSED)


@derived
def pcie_ipc_speculation_case(ev: ModelSources) -> dict[Regime, SpeculationCase | None]:
    """The case study's box per regime with SGLang's PCIe-IPC all-reduce for every TP all-reduce (target and draft,
    plain decoding included), calibrated as :func:`speculation_case` (None: it cannot run in that regime)."""
    return _cases(ev, inputs(ev), *decode_rate(ev), collective=Collective.PCIE_IPC)


def speculation_cases(
    ev: ModelSources, model: ModelInputs, decode_tps: float, decode_source: str
) -> dict[Regime, SpeculationCase]:
    """The case study's model per regime of ``model``'s curves, calibrated to ``decode_tps`` (plain decoding at one
    stream, from ``decode_source``): EAGLE-3 at the reported accept length over the draft-token range."""
    return {r: case for r, case in _cases(ev, model, decode_tps, decode_source).items() if case}


def _cases(
    ev: ModelSources,
    model: ModelInputs,
    decode_tps: float,
    decode_source: str,
    collective: Collective = Collective.NCCL,
) -> dict[Regime, SpeculationCase | None]:
    """:func:`speculation_cases` with the verify passes' all-reduces on ``collective`` (None where it cannot run)."""
    a, curves = model.account, model.curves
    measured = measured_overheads(ev.measured)
    out: dict[Regime, SpeculationCase | None] = {}
    for regime in curves.regimes():
        curve = None if collective is Collective.NCCL else _verify_curve(model, regime, collective)
        if collective is not Collective.NCCL and curve is None:
            out[regime] = None
            continue
        box = case_study_box(curves, ev.measured, regime, decode_regime(regime), curve, collective)
        nccl_box = box if curve is None else case_study_box(curves, ev.measured, regime, decode_regime(regime))
        cal = calibrate_decode(nccl_box, measured, decode_tps, decode_source)  # the rate was measured on NCCL
        if collective is Collective.PCIE_IPC:  # plain decoding runs on it too
            cal = carried_host(nccl_box, cal)
        answers = {k: answer(box, cal, Drafter.EAGLE3, a.accept_reported, k) for k in a.draft_tokens}
        crossover = combined_crossover(answers.values())
        out[regime] = SpeculationCase(regime, answers, crossover, cal.consistent, a.accept_reported, box, cal)
    return out


def _verify_curve(model: ModelInputs, regime: Regime, collective: Collective) -> tuple[AllreduceCurve, str] | None:
    """The fused or PCIe-IPC curve of the case study's box in ``regime`` (None: it cannot run there)."""
    if collective is Collective.FUSED:
        return fused_regime_curve(model.curves, regime, CASE_GPUS, model.norm_us, KIMI_K2_HIDDEN)
    return pcie_ipc_regime_curve(model.curves, regime, CASE_GPUS)
