"""The four questions the book answers, per communication regime, from the options priced there (modelled):
deploy fusion? keep EAGLE-3? eliminate all-reduces, and how? from how many streams turn speculation off? And the
thresholds that tell a reader's box which regime's answer applies (the communication probe measures them).

Everything here is computed from :mod:`verifylab.model.options` and the regime curves; prose formats these
values and types none.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from verifylab.model.case import account, inputs, speculation_case, whatif_table
from verifylab.model.costmodel import eagle3_tokens_per_s
from verifylab.model.cycle import Span
from verifylab.model.options import GPUS, OPTIONS, Option, option_pass
from verifylab.model.regimes import REGIME_TITLE, Collective, Price, decode_regime
from verifylab.model.speculation_box import DEFAULT_STREAMS, answer, combined_crossover
from verifylab.sources import ModelSources
from verifylab.vocab import DRAFT_TOKENS, KIMI_K2_HIDDEN, LOAD_STREAMS, Drafter, Regime

REFERENCE_MESSAGE = DRAFT_TOKENS[0] * KIMI_K2_HIDDEN * 2  # a verify pass's all-reduce at one stream: 57 KB


@dataclass(frozen=True)
class RegimeAnswer:
    """The answers for one regime."""

    regime: Regime
    decode_tps: Span  # plain decoding, one stream (TP 8, NCCL)
    eagle_tps: Span  # EAGLE-3, one stream (TP 8, NCCL)
    fused_tps: Span | None  # EAGLE-3 with fusion, one stream
    fusion_gain_by_load: dict[int, Span | None]  # streams -> NCCL - fused verify (None: fusion cannot run)
    best_by_load: dict[int, str]  # streams -> the option SGLang runs with EAGLE-3 with the fastest verify (midpoint)
    crossover: tuple[float | None, float | None]  # streams where EAGLE-3's gain falls below 1: pessimistic,
    # optimistic (None: not within the streams priced); from verifylab.model.speculation
    speculation_wins_everywhere: bool
    speculation_consistent: bool = True  # False: the box's reported decode rate is faster than this regime allows

    @property
    def fusion_gain_ms(self) -> Span | None:
        """NCCL - fused verify at one stream (the first load priced)."""
        return self.fusion_gain_by_load[1]


def plain_decoding(ev: ModelSources, regime: Regime, streams: int) -> Span | None:
    """Plain decoding (TP 8, NCCL) at ``streams``: one token per stream per step; one stream's tok/s."""
    p = option_pass(inputs(ev), Option.TP8_NCCL, decode_regime(regime), streams, 1)
    return None if p.verify is None else Span(1e3 / p.verify.high, 1e3 / p.verify.low)


def _eagle(ev: ModelSources, option: Option, regime: Regime, streams: int) -> Span | None:
    """EAGLE-3 with ``option``: one stream's tok/s over the draft-token range and both readings."""
    a = account(ev)
    rates = []
    for k in a.draft_tokens:
        p = option_pass(inputs(ev), option, regime, streams, k)
        if p.verify is None:
            return None
        rates += [
            eagle3_tokens_per_s(r.accept, ms, r.draft_ms) for ms in (p.verify.low, p.verify.high) for r in a.readings
        ]
    return Span(min(rates), max(rates))


def _crossover(ev: ModelSources, regime: Regime) -> tuple[tuple[float | None, float | None], bool]:
    """Where EAGLE-3 (TP 8, NCCL) stops paying against plain decoding: the speculation model of the case study's box
    (calibrated to its plain decode rate, with the overheads measured on the H200 grid), over every end of its
    inputs' ranges and the draft-token range."""
    case = speculation_case(ev)[regime]
    return case.crossover, case.crossover == (None, None)


def deployable_with_eagle3() -> list[Option]:
    """The options SGLang runs with EAGLE-3 (read from the audited wheels, :data:`OPTIONS`): only these can be the
    fastest way to serve the case study, whatever their verify pass costs; the others are shown with why not."""
    return [k for k, facts in OPTIONS.items() if not facts.eagle3.startswith("no")]


def regime_answer(ev: ModelSources, regime: Regime) -> RegimeAnswer:
    """The four answers for ``regime``."""
    loads = {c: whatif_table(ev, c).set_index(["regime_key", "key"]) for c in LOAD_STREAMS}

    def verify(table, key) -> Span | None:
        row = table.loc[(regime.value, key)]
        return None if pd.isna(row["verify_ms_low"]) else Span(row["verify_ms_low"], row["verify_ms_high"])

    def gain(table) -> Span | None:
        """Verify time fusion saves: NCCL's all-reduces and norms less the fused kernels, low ends together and
        high ends together (the compute is the same in both and cancels)."""
        nccl, fused = (
            table.loc[(regime.value, Option.TP8_NCCL.value)],
            table.loc[(regime.value, Option.TP8_FUSED.value)],
        )
        if pd.isna(fused["comm_ms_low"]) or pd.isna(nccl["comm_ms_low"]):
            return None
        ends = [nccl[f"comm_ms_{e}"] + nccl[f"norm_ms_{e}"] - fused[f"comm_ms_{e}"] for e in ("low", "high")]
        return Span(min(ends), max(ends))

    best = {}
    for c, table in loads.items():
        priced = {k.value: span for k in deployable_with_eagle3() if (span := verify(table, k.value)) is not None}
        best[c] = min(priced, key=lambda k: priced[k].mid)
    crossover, everywhere = _crossover(ev, regime)
    return RegimeAnswer(
        regime,
        plain_decoding(ev, regime, 1),  # type: ignore[arg-type]
        _eagle(ev, Option.TP8_NCCL, regime, 1),  # type: ignore[arg-type]
        _eagle(ev, Option.TP8_FUSED, regime, 1),
        {c: gain(table) for c, table in loads.items()},
        best,
        crossover,
        everywhere,
        speculation_case(ev)[regime].consistent,
    )


def thresholds(ev: ModelSources) -> dict[str, Price]:
    """What an 8-rank all-reduce of one stream's verify message costs in each regime: the probe's reading on a
    reader's box is compared with these."""
    curves = inputs(ev).curves
    out = {}
    for regime in curves.regimes():
        price = curves.price(regime, Collective.NCCL, GPUS, REFERENCE_MESSAGE)
        if isinstance(price, Price):
            out[regime.value] = price
    return out


def decision_table(ev: ModelSources) -> pd.DataFrame:
    """One row per regime: the all-reduce band that identifies it, plain decoding vs EAGLE-3 (with and without
    fusion) at one stream, the fastest option at 1, 8 and 32 streams, and where speculation stops paying."""
    bands = thresholds(ev)
    rows = []
    for regime in inputs(ev).curves.regimes():
        a = regime_answer(ev, regime)
        band = bands.get(regime.value)
        rows.append(
            {
                "regime": REGIME_TITLE[regime],
                "regime_key": regime.value,
                "allreduce_57kb_us": f"{band.low_us:.0f}-{band.high_us:.0f}" if band else "",
                "decode_tok_s": a.decode_tps.text(0),
                "eagle3_tok_s": a.eagle_tps.text(0),
                "eagle3_gain_x": speculation_case(ev)[regime].gain_at(1).text(2),
                "eagle3_fusion_tok_s": a.fused_tps.text(0) if a.fused_tps else "cannot run (needs P2P)",
                "fusion_saves_ms": a.fusion_gain_ms.text(2) if a.fusion_gain_ms else "—",
                "fastest_at": "; ".join(f"{c}: {OPTIONS[Option(k)].title}" for c, k in a.best_by_load.items()),
                "speculation_off_from": crossover_text(a),
                "provenance": "modelled",
            }
        )
    return pd.DataFrame(rows)


def crossover_text(a: RegimeAnswer) -> str:
    """Where speculation stops paying, in words (``never pays``: below 1 from one stream at both ends)."""
    return crossover_words(a.crossover, a.speculation_consistent)


def crossover_words(crossover: tuple[float | None, float | None], consistent: bool = True) -> str:
    """A crossover range (pessimistic, optimistic; None: beyond the streams priced) as a verb phrase: ``pays up to
    128 streams``, ``never pays``, ``stops paying at about 12 streams``, ``stops paying between 4.5 and 30
    streams``."""
    last = max(DEFAULT_STREAMS)
    low, high = crossover
    if low is None and high is None:
        return f"pays up to {last} streams"

    def streams(value: float | None) -> str:
        if value is None:
            return f"beyond {last}"
        return "1" if value <= 1 else (f"{value:.0f}" if value >= 10 else f"{value:.1f}")

    if high is not None and high <= 1:
        text = "never pays"
    elif low is not None and high is not None and streams(low) == streams(high):
        text = f"stops paying at about {streams(low)} streams"
    elif high is None:
        text = f"stops paying somewhere from {streams(low)} streams to beyond {last}"
    else:
        text = f"stops paying between {streams(low)} and {streams(high)} streams"
    if not consistent:
        text += " (not the case study's regime: it decodes faster than this regime allows)"
    return text


SPECULATION_ACCEPTS = (1.5, 2.0, 2.5, 3.0)  # accept lengths a reader's traffic may give


def speculation_by_accept(ev: ModelSources) -> pd.DataFrame:
    """Per regime and accept length on the case study's box (TP 8, NCCL, EAGLE-3 over its draft-token range): the
    gain at one stream and where speculation stops paying (modelled: ``verifylab model speculation``)."""
    rows = []
    for regime, case in speculation_case(ev).items():
        for accept in SPECULATION_ACCEPTS:
            results = [answer(case.box, case.calibrated, Drafter.EAGLE3, accept, k) for k in case.by_draft_tokens]
            ones = [r.rows[0].gain for r in results]
            crossover = combined_crossover(results)
            rows.append(
                {
                    "regime": REGIME_TITLE[regime],
                    "accept_length": accept,
                    "gain_one_stream": Span(min(g.low for g in ones), max(g.high for g in ones)).text(2),
                    "speculation_pays": crossover_words(crossover, case.consistent),
                    "provenance": "modelled",
                }
            )
    return pd.DataFrame(rows)


def fusion_at_one_stream(gain: Span | None) -> str:
    """What fusion's verify-pass saving range says to do at one stream: deploy it, do not, or measure first."""
    return {
        "cannot run": "not priced",
        "on": "yes at one stream",
        "off": "no: it loses at one stream",
    }.get(fusion_switch(gain), "not resolved at one stream (measure it on the box first)")


def fusion_switch(gain: Span | None) -> str:
    """Fusion on or off from its verify-pass saving range: ``on`` (it saves at every end), ``off`` (it loses at
    every end), ``measure`` (the range straddles 0), ``cannot run`` (not priced: no working P2P)."""
    if gain is None:
        return "cannot run"
    if gain.low > 0:
        return "on"
    if gain.high < 0:
        return "off"
    return "measure"


FUSION_SWITCH_WORDS = {
    "on": "on",
    "off": "off",
    "measure": "not resolved: measure on the box",
    "cannot run": "cannot run: needs working P2P",
}


def fusion_by_load_words(answer: RegimeAnswer) -> str:
    """Fusion on or off at each stream count, in words: ``1 stream: not resolved (anything from ...); 8 streams:
    off (a loss of ...)`` (the cells of :func:`fusion_by_load`)."""
    return "; ".join(
        f"{streams} stream{'s' if streams > 1 else ''}: {FUSION_SWITCH_WORDS[fusion_switch(gain)]}"
        + (f" ({gain.gain_text(2, 'ms')})" if gain else "")
        for streams, gain in answer.fusion_gain_by_load.items()
    )


def fusion_by_load(ev: ModelSources) -> pd.DataFrame:
    """Per regime and stream count: what fusion saves on a verify pass (NCCL less fused, modelled) and whether to
    turn it on, off, or measure first."""
    rows = []
    for regime in inputs(ev).curves.regimes():
        for streams, gain in regime_answer(ev, regime).fusion_gain_by_load.items():
            rows.append(
                {
                    "regime": REGIME_TITLE[regime],
                    "streams": streams,
                    "fusion_on_a_verify_pass": gain.gain_text(2, "ms") if gain else "—",
                    "fusion": FUSION_SWITCH_WORDS[fusion_switch(gain)],
                    "provenance": "modelled",
                }
            )
    return pd.DataFrame(rows)
