"""Which all-reduce `box --plan` launches among those the SGLang named offers on the box: NCCL (its default), its
PCIe-IPC all-reduce and FlashInfer's fused all-reduce + RMSNorm, each where a curve prices it. One rule, on the best
configuration's goodput on each at the owner's load: an alternative is launched where it is decided ahead of NCCL
(:func:`ahead`), the better-ranked of two that are; else NCCL; an all-reduce that ties the launched one has its best
configuration measured by ``--verify`` as one server more (the best-ranked such one)."""

from __future__ import annotations

from dataclasses import dataclass

from verifylab.model.answers.box_plan import COLLECTIVE_NAMES, COLLECTIVE_WORDS, Priced, goodput_rank
from verifylab.model.pricing.regimes import Collective
from verifylab.span import TIE_MARGIN, Span, decided_more
from verifylab.vocab import streams_words

LAUNCHED = {Collective.NCCL: "nccl", Collective.PCIE_IPC: "pcie_ipc", Collective.FUSED: "fused"}  # BoxPlan's words
NAMES = {c: COLLECTIVE_NAMES[word] for c, word in LAUNCHED.items()}
SHORT = {c: COLLECTIVE_WORDS[word] for c, word in LAUNCHED.items()}


def not_launched(collective: Collective, why: str) -> str:
    """The all-reduce line's clause for an all-reduce the plan does not launch, and why."""
    return f"{NAMES[collective]} not launched: {why}"


def ahead(goodput: Span, other: Span) -> bool:
    """Whether one all-reduce's best goodput is decided above the other's: the tie margin at both ends, or the SLO met
    at the pessimistic end where the other's misses it there (goodput 0), as a plan ranks configurations."""
    return decided_more(goodput, other) or (goodput.low > 0 and other.low == 0)


@dataclass(frozen=True)
class AllReduceChoice:
    """The all-reduce launched, the one whose best configuration ``--verify`` measures too (a tie; None: none), and
    the all-reduce line's clauses: why the launched one, and why each other is not."""

    launched: Collective
    measured_too: Collective | None
    clauses: tuple[str, ...]


def choose_all_reduce(best: dict[Collective, Priced]) -> AllReduceChoice:
    """The rule above on ``best``, the model's best configuration on each all-reduce priced (NCCL among them)."""
    nccl = best[Collective.NCCL]
    others = sorted((c for c in best if c is not Collective.NCCL), key=lambda c: goodput_rank(best[c]), reverse=True)
    launched = next((c for c in others if ahead(best[c].at_load.goodput, nccl.at_load.goodput)), Collective.NCCL)
    rest = [c for c in (Collective.NCCL, *others) if c is not launched]
    tied = [c for c in rest if not ahead(best[launched].at_load.goodput, best[c].at_load.goodput)]
    too = max(tied, key=lambda c: goodput_rank(best[c]), default=None)

    def at(c: Collective, against: Collective) -> str:
        mine, theirs = best[c].at_load.goodput.text(0), best[against].at_load.goodput.text(0)
        return (
            f"at {streams_words(nccl.at_load.streams)} (modelled, the best configuration on each): "
            f"{mine} tok/s against {SHORT[against]}'s {theirs}"
        )

    clauses = [] if launched is Collective.NCCL else [f"chosen over NCCL by goodput {at(launched, Collective.NCCL)}"]
    for c in rest:
        if c is Collective.NCCL:
            continue
        if c not in tied:
            clauses.append(not_launched(c, f"{SHORT[launched]} is ahead by goodput {at(c, launched)}"))
            continue
        first = "NCCL, SGLang's default" if launched is Collective.NCCL else f"{SHORT[launched]}, ahead of NCCL"
        measured = f"; `--verify` measures {SHORT[c]}'s best ({best[c].config.words()}) too" if c is too else ""
        clauses.append(
            not_launched(
                c,
                f"a tie, neither is {TIE_MARGIN:.0%} ahead at both ends nor alone within the SLO at its pessimistic "
                f"end {at(c, launched)}: {first}{measured}",
            )
        )
    return AllReduceChoice(launched, too, tuple(clauses))
