"""The four questions the book answers, per communication regime, from the options priced there (modelled):
deploy fusion? keep EAGLE-3? eliminate all-reduces, and how? from how many streams turn speculation off? And the
thresholds that tell a reader's box which regime's answer applies (the communication probe measures them).

Everything here is computed from :mod:`verifylab.model.options` and the regime curves; prose formats these
values and types none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from verifylab.model.answers.words import case_recrossing, crossover_words, signed_text, speculation_in_words
from verifylab.model.case.cycle import cycle_account
from verifylab.model.case.options import GPUS, OPTIONS, Option
from verifylab.model.case.speculation import (
    SpeculationCase,
    fused_speculation_case,
    inputs,
    pcie_ipc_speculation_case,
    speculation_case,
)
from verifylab.model.case.whatif import whatif_table
from verifylab.model.inputs.stored import stored_inputs
from verifylab.model.pricing.pass_cost import compare
from verifylab.model.pricing.pricer import price_verify, scenarios
from verifylab.model.pricing.regimes import REGIME_TITLE, Collective, Price
from verifylab.sources import ModelSources
from verifylab.span import TIE_MARGIN, Span, decided_faster, times
from verifylab.vocab import COMMAND_DRAFT_TOKENS, DRAFT_TOKENS, KIMI_K2_HIDDEN, LOAD_STREAMS, Regime

REFERENCE_MESSAGE = DRAFT_TOKENS[0] * KIMI_K2_HIDDEN * 2  # a verify pass's all-reduce at one stream: 57 KB


@dataclass(frozen=True)
class FusionSaving:
    """What fusion saves on one verify pass (NCCL less fused, ms) per draft-token count, each priced like with
    like: both sides at the same tokens and the same end of every input's range."""

    by_draft_tokens: dict[int, Span]

    @property
    def low(self) -> float:
        return min(s.low for s in self.by_draft_tokens.values())

    @property
    def high(self) -> float:
        return max(s.high for s in self.by_draft_tokens.values())

    @property
    def mid(self) -> float:
        return (self.low + self.high) / 2

    def text(self, digits: int = 2) -> str:
        """``4: 0.10-0.30; 8: -0.20 to 0.10`` (draft tokens: ms saved), as a table cell shows it."""
        return "; ".join(f"{k}: {signed_text(span, digits)}" for k, span in sorted(self.by_draft_tokens.items()))

    def gain_text(self, digits: int = 2, unit: str = "ms") -> str:
        """``a gain of 0.10-0.30 ms at 4 draft tokens, a loss of 0.20-0.40 ms at 8 draft tokens``."""
        return ", ".join(
            f"{span.gain_text(digits, unit)} at {k} draft tokens" for k, span in sorted(self.by_draft_tokens.items())
        )


@dataclass(frozen=True)
class RegimeAnswer:
    """The answers for one regime. Every tok/s and gain comes from the speculation model of the case study's box
    (TP 8, calibrated to its plain decode rate): one pricer for the whole row."""

    regime: Regime
    decode_tps: Span  # plain decoding, one stream (TP 8, NCCL)
    gain: Span  # EAGLE-3 over plain decoding at one stream, paired
    fused_gain: Span | None  # EAGLE-3 with fusion over plain decoding at one stream (None: fusion cannot run)
    fusion_gain_by_load: dict[int, FusionSaving | None]  # streams -> what fusion saves per verify pass
    best_by_load: dict[int, str]  # streams -> the option SGLang runs with EAGLE-3 with the fastest verify (midpoint)
    crossover: tuple[float | None, float | None]  # streams where EAGLE-3's gain falls below 1: pessimistic,
    # optimistic (None: not within the streams priced); from verifylab.model.speculation
    speculation_wins_everywhere: bool
    speculation_consistent: bool = True  # False: the box's reported decode rate is faster than this regime allows
    ipc_decode_tps: Span | None = None  # plain decoding on SGLang's PCIe-IPC all-reduce (None: it cannot run)
    ipc_gain: Span | None = None  # EAGLE-3 over plain decoding, both on the PCIe-IPC all-reduce
    ipc_crossover: tuple[float | None, float | None] | None = None  # where EAGLE-3 stops paying on PCIe-IPC
    recrossing: str = ""  # where a gain that fell below 1 pays again (:func:`recrossing_words`), or nothing
    # streams -> why the fastest is not decided there (a tie, or a price past its sources), in words; absent: decided
    best_caveat_by_load: dict[int, str] = field(default_factory=dict)
    # streams -> how far fusion's or NCCL's price at the command's draft tokens lies outside their sources' sizes
    fusion_extrapolated_by_load: dict[int, str] = field(default_factory=dict)

    def fastest_at(self, streams: int) -> str:
        """The fastest option's title at ``streams``, said to be ahead on its midpoint only where it is not decided
        (:attr:`best_caveat_by_load`)."""
        title = OPTIONS[Option(self.best_by_load[streams])].title
        return title if streams not in self.best_caveat_by_load else f"{title} (ahead on its midpoint only)"

    @property
    def ipc_eagle_tps(self) -> Span | None:
        """EAGLE-3 on the PCIe-IPC all-reduce at one stream (the gain times its plain decoding, end by end)."""
        if self.ipc_gain is None or self.ipc_decode_tps is None:
            return None
        return times(self.ipc_gain, self.ipc_decode_tps)

    @property
    def eagle_tps(self) -> Span:
        """EAGLE-3 at one stream: the gain times plain decoding, end by end (the ratio of the ends is the gain)."""
        return times(self.gain, self.decode_tps)

    @property
    def fused_tps(self) -> Span | None:
        """EAGLE-3 with fusion at one stream, likewise."""
        return None if self.fused_gain is None else times(self.fused_gain, self.decode_tps)

    @property
    def fusion_gain_ms(self) -> FusionSaving | None:
        """NCCL - fused verify at one stream (the first load priced), per draft-token count."""
        return self.fusion_gain_by_load[1]


def fusion_saving(nccl: SpeculationCase, fused: SpeculationCase, streams: int) -> FusionSaving:
    """What fusion saves on one verify pass at ``streams`` per draft-token count: the NCCL box's verify less the
    fused box's, scenario by scenario (the same ends of every range on both sides)."""
    out = {}
    for k in nccl.by_draft_tokens:
        pairs = zip(scenarios(nccl.box), scenarios(fused.box), strict=True)
        deltas = [
            compare(
                price_verify(nccl.box, nccl.calibrated.overheads, k, streams, a),
                price_verify(fused.box, fused.calibrated.overheads, k, streams, b),
            ).saved_ms
            for a, b in pairs
        ]
        out[k] = Span(min(deltas), max(deltas))
    return FusionSaving(out)


def deployable_with_eagle3() -> list[Option]:
    """The options SGLang runs with EAGLE-3 (read from the audited wheels, :data:`OPTIONS`): only these can be the
    fastest way to serve the case study, whatever their verify pass costs; the others are shown with why not."""
    return [k for k, facts in OPTIONS.items() if not facts.eagle3.startswith("no")]


def regime_answer(ev: ModelSources, regime: Regime) -> RegimeAnswer:
    """The four answers for ``regime``."""
    loads = {c: whatif_table(stored_inputs(ev), c).set_index(["regime_key", "key"]) for c in LOAD_STREAMS}

    def verify(table, key) -> Span | None:
        row = table.loc[(regime.value, key)]
        return None if pd.isna(row["verify_ms_low"]) else Span(row["verify_ms_low"], row["verify_ms_high"])

    best, caveats = {}, {}
    for c, table in loads.items():
        priced = {k.value: span for k in deployable_with_eagle3() if (span := verify(table, k.value)) is not None}
        best[c] = min(priced, key=lambda k: priced[k].mid)
        if caveat := fastest_caveat(ev, regime, c, priced):
            caveats[c] = caveat
    stored = stored_inputs(ev)
    case, fused = speculation_case(stored)[regime], fused_speculation_case(stored)[regime]
    ipc = pcie_ipc_speculation_case(stored)[regime]
    return RegimeAnswer(
        regime,
        case.plain_at(1),
        case.gain_at(1),
        None if fused is None else fused.gain_at(1),
        {c: None if fused is None else fusion_saving(case, fused, c) for c in LOAD_STREAMS},
        best,
        case.crossover,
        case.crossover == (None, None),
        case.consistent,
        None if ipc is None else ipc.plain_at(1),
        None if ipc is None else ipc.gain_at(1),
        None if ipc is None else ipc.crossover,
        case_recrossing(case),
        caveats,
        {c: words for c in LOAD_STREAMS if (words := fusion_extrapolation(ev, regime, c))},
    )


def fusion_extrapolation(ev: ModelSources, regime: Regime, streams: int) -> str:
    """How far the two prices fusion's saving compares (the fused kernel's and NCCL's) lie outside their sources'
    sizes at ``streams`` with the launch command's draft tokens, in words ("" where both are within them)."""
    message = COMMAND_DRAFT_TOKENS * streams * KIMI_K2_HIDDEN * 2.0
    curves = inputs(stored_inputs(ev)).curves
    words = []
    for collective in (Collective.FUSED, Collective.NCCL):
        price = curves.price(regime, collective, GPUS, message)
        if isinstance(price, Price) and price.extrapolated:
            words.append(f"{collective.value} {price.extrapolated}")
    return "; ".join(words)


# The collective each option's verify all-reduces run on, and among how many ranks (its price says how far the
# message lies from what its sources measured); DP attention's all-to-all is modelled from no curve of its own.
OPTION_COLLECTIVE = {
    Option.TP8_NCCL: (Collective.NCCL, GPUS),
    Option.TP8_FUSED: (Collective.FUSED, GPUS),
    Option.TP8_PCIE_IPC: (Collective.PCIE_IPC, GPUS),
    Option.EP8_TP_ATTENTION: (Collective.NCCL, GPUS),
    Option.TP4_PP2: (Collective.NCCL, 4),
}


_PLAN_COLLECTIVES = {Option.TP8_NCCL, Option.TP8_PCIE_IPC}  # the all-reduces `box --plan` chooses between
_TIE_BREAKER = {  # what breaks a tie of two options: the owner's command where it launches both, else a measurement
    True: "`verifylab box --plan` on the box chooses between them by goodput at your load, and its `--verify` "
    "measures both where that ties too",
    False: "a measurement of both on the box breaks it",
}


def fastest_caveat(ev: ModelSources, regime: Regime, streams: int, priced: dict[str, Span]) -> str:
    """Why the fastest verify at ``streams`` is not decided, in words ("" where it is): it is not faster than the
    runner-up at both ends (:func:`decided_faster`: a tie, named with the measurement that breaks it), or its
    collective is priced past every size its sources measured (named with the distance)."""
    order = sorted(priced, key=lambda k: priced[k].mid)
    first = order[0]
    words = []
    if len(order) > 1 and not decided_faster(priced[first], priced[order[1]]):
        runner = order[1]
        breaker = _TIE_BREAKER[{Option(first), Option(runner)} <= _PLAN_COLLECTIVES]
        words.append(
            f"a tie with {OPTIONS[Option(runner)].title} (verify {priced[first].text(1)} against "
            f"{priced[runner].text(1)} ms, not {TIE_MARGIN:.0%} faster at both ends; {breaker})"
        )
    made = OPTION_COLLECTIVE.get(Option(first))
    if made is not None:
        stored = stored_inputs(ev)
        message = max(cycle_account(stored).draft_tokens) * streams * KIMI_K2_HIDDEN * 2.0
        price = inputs(stored).curves.price(regime, made[0], made[1], message)
        if isinstance(price, Price) and price.extrapolated:
            words.append(f"its {made[0].value} is {price.extrapolated}")
        elif isinstance(price, str) and regime is not Regime.MEASURED:
            words.append(f"its {made[0].value} is not priced here ({price})")
    return "; ".join(words)


def thresholds(ev: ModelSources) -> dict[str, Price]:
    """What an 8-rank all-reduce of one stream's verify message costs in each regime: the probe's reading on a
    reader's box is compared with these."""
    curves = inputs(stored_inputs(ev)).curves
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
    for regime in inputs(stored_inputs(ev)).curves.regimes():
        a = regime_answer(ev, regime)
        band = bands.get(regime.value)
        rows.append(
            {
                "regime": REGIME_TITLE[regime],
                "regime_key": regime.value,
                "allreduce_57kb_us": f"{band.low_us:.0f}-{band.high_us:.0f}" if band else "",
                "decode_tok_s": a.decode_tps.text(0),
                "eagle3_tok_s": a.eagle_tps.text(0),
                "eagle3_gain_x": a.gain.text(2),
                "eagle3_fusion_tok_s": a.fused_tps.text(0) if a.fused_tps else "cannot run (needs P2P)",
                "fusion_saves_ms": a.fusion_gain_ms.text(2) if a.fusion_gain_ms else "—",
                "pcie_ipc_decode_tok_s": a.ipc_decode_tps.text(0) if a.ipc_decode_tps else "cannot run (needs P2P)",
                "pcie_ipc_eagle3_tok_s": a.ipc_eagle_tps.text(0) if a.ipc_eagle_tps else "cannot run (needs P2P)",
                "pcie_ipc_gain_x": a.ipc_gain.text(2) if a.ipc_gain else "—",
                "fastest_at": "; ".join(f"{c}: {a.fastest_at(c)}" for c in a.best_by_load),
                "speculation_off_from": crossover_text(a),
                "provenance": "modelled",
            }
        )
    return pd.DataFrame(rows)


def crossover_text(a: RegimeAnswer) -> str:
    """Where speculation stops paying, in words (``never pays``: below 1 from one stream at both ends)."""
    return crossover_words(a.crossover, a.speculation_consistent) + a.recrossing


SPECULATION_ACCEPTS = (1.5, 2.0, 2.5, 3.0)  # accept lengths a reader's traffic may give


def speculation_by_accept(ev: ModelSources) -> pd.DataFrame:
    """Per regime and accept length on the case study's box (TP 8, NCCL, EAGLE-3 over its draft-token range): the
    gain at one stream and where speculation stops paying (modelled: ``verifylab model speculation``)."""
    rows = []
    for regime, case in speculation_case(stored_inputs(ev)).items():
        for accept in SPECULATION_ACCEPTS:
            gain, pays = speculation_in_words(case, case.box, accept)
            rows.append(
                {
                    "regime": REGIME_TITLE[regime],
                    "accept_length": accept,
                    "gain_one_stream": gain,
                    "speculation_pays": pays,
                    "provenance": "modelled",
                }
            )
    return pd.DataFrame(rows)


def fusion_at_one_stream(gain: Span | FusionSaving | None, chain: int | None = None) -> str:
    """What fusion's verify-pass saving range says to do at one stream: deploy it, do not, or measure first; with
    ``chain``, at that many draft tokens (the launch command's), not over every count priced."""
    where = "at one stream"
    if chain is not None and isinstance(gain, FusionSaving) and chain in gain.by_draft_tokens:
        gain, where = gain.by_draft_tokens[chain], f"at one stream with {chain} draft tokens (the command's)"
    return {
        "cannot run": "not priced",
        "on": f"yes {where}",
        "off": f"no: it loses {where}",
    }.get(fusion_switch(gain), f"not resolved {where} (measure it on the box first)")


def fusion_switch(gain: Span | FusionSaving | None) -> str:
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
    """Per regime, stream count and draft-token count: what fusion saves on a verify pass (NCCL less fused at the
    same tokens, modelled) and whether to turn it on, off, or measure first."""
    rows, stored = [], stored_inputs(ev)
    for regime in inputs(stored).curves.regimes():
        for streams, saving in regime_answer(ev, regime).fusion_gain_by_load.items():
            by_k = saving.by_draft_tokens if saving else dict.fromkeys(cycle_account(stored).draft_tokens)
            for k, gain in by_k.items():
                rows.append(
                    {
                        "regime": REGIME_TITLE[regime],
                        "streams": streams,
                        "draft_tokens": k,
                        "fusion_on_a_verify_pass": gain.gain_text(2, "ms") if gain else "—",
                        "fusion": FUSION_SWITCH_WORDS[fusion_switch(gain)],
                        "provenance": "modelled",
                    }
                )
    return pd.DataFrame(rows)
