"""Chapter 4's lead finding in words: what to do depends on the box's communication regime, each regime's answer
in numbers, and where the case study's verify pass sits (formatted from the model's answers and the cycle account)."""

from __future__ import annotations

from collections.abc import Sequence

from verifylab.model.answers.decision import crossover_text, decision_table, regime_answer, thresholds
from verifylab.model.views import cycle_account, inputs, reported_pass_floor, stored_inputs
from verifylab.sources import ModelSources
from verifylab.vocab import Regime


def regime_finding_words(ev: ModelSources, loads: Sequence[int]) -> str:
    """The decision by regime in one paragraph, the fastest option named at the first and last of ``loads``."""
    stored = stored_inputs(ev)
    a, m = cycle_account(stored), inputs(stored)
    bands = thresholds(ev)
    low, high, _ = m.curves.reported_allreduce or (0.0, 0.0, 0.0)
    healthy, host = regime_answer(ev, Regime.HEALTHY_P2P), regime_answer(ev, Regime.HOST_MEMORY)
    band = bands[Regime.HEALTHY_P2P.value]
    slow = bands[Regime.HOST_MEMORY.value]

    best_one, best_load = healthy.fastest_at(min(loads)), healthy.fastest_at(max(loads))
    floor = reported_pass_floor(a)
    return (
        f"**What to do depends on the box's communication regime, and the case study's verify pass sits in the "
        f"slow one.** Its 30 ms cannot be 25 ms of all-reduce and 5 ms of compute: reading the weights alone takes "
        f"{floor.text(1, 'ms')} at peak bandwidth, which leaves **{low:.0f}-{high:.0f} µs per all-reduce** — "
        f"where NCCL through host memory lands ({slow.low_us:.0f}-{slow.high_us:.0f} µs at 8 ranks) and far above "
        f"healthy PCIe P2P ({band.low_us:.0f}-{band.high_us:.0f} µs, public measurements). "
        f"With healthy P2P, EAGLE-3 at one stream gives {healthy.eagle_tps.text(0, 'tok/s')} against "
        f"{healthy.decode_tps.text(0, 'tok/s')} for plain decoding, fusion makes "
        f"{healthy.fusion_gain_ms.gain_text(2, 'ms') if healthy.fusion_gain_ms else 'nothing priced'} per verify "
        "pass, "
        f"the fastest option is {best_one} at one stream and {best_load} at {max(loads)}, and speculation "
        f"{crossover_text(healthy)}; through host memory EAGLE-3 gives {host.eagle_tps.text(0, 'tok/s')} and "
        f"fusion cannot run. The reported {a.jump_text()} beat plain decoding by only "
        f"{a.text('bottom_line_pct')}, and kernel fusion carries {a.text('kernel_fusion_ms')} of the "
        f"{a.text('removed_ms')} it removed per cycle. All modelled within physical floors; ranges span the "
        f"{a.draft_tokens[0]}-{a.draft_tokens[1]} draft tokens, the two measured rates before the jump and the "
        "sources' spread."
    )


def options_by_load_words(ev: ModelSources) -> str:
    """The fastest option SGLang runs with EAGLE-3, per regime and load, as the decision table names it (a tie
    named as one): the finding of the page that prices every option."""
    table = decision_table(ev)
    regimes = "\n".join(f"- **{row.regime}**, by streams — {row.fastest_at}" for row in table.itertuples())
    return (
        "Every option is priced at its own message size from each regime's all-reduce curve, and the fastest one "
        "SGLang runs with EAGLE-3 changes with the load. Where two options' ranges overlap the leader is ahead on "
        f"its midpoint only, and a measurement on the box decides.\n\n{regimes}"
    )


def reconciliation_words(ev: ModelSources) -> str:
    """What the reconciliation of the case study's figures concludes, formatted from the cycle account."""
    a = cycle_account(stored_inputs(ev))
    return (
        f"**Kernel fusion carries {a.text('kernel_fusion_ms')} of the {a.text('removed_ms')} the reported jump "
        f"removed per cycle,** and EAGLE-3 with fusion beat plain decoding by only {a.text('bottom_line_pct')}. "
        "The reconciliation below shows the arithmetic from "
        "the reported figures alone; the hypotheses after it rank what else can carry the jump, each with the "
        "measurement on the case study's box that decides it."
    )
