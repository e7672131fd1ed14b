"""One account of the case study's EAGLE-3 cycle: built once from the reported figures, every unresolved choice
kept as a range, every derived quantity computed here and nowhere else.

The reported figures cannot all hold at once: a 30 ms verify pass that is 97 % of the cycle with an accept
length of 2.0 gives 64.7 tok/s, not the 54.1 reported. Two readings keep one or the other:
- *accept as reported* (2.0): the cycle is 2.0 / 54.1 tok/s and the verify share ~81 %;
- *share as reported* (97 %): the cycle is 30 ms / 0.97 and the accept length ~1.67.
Every quantity that depends on the choice is a :class:`Span` over both readings. Nothing is solved so that a
figure comes out: what the measured factors do not cover is the *unexplained remainder*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verifylab.errors import ModelInputError
from verifylab.model.comm_pass import norm_us_measured
from verifylab.store.evidence import Evidence
from verifylab.store.reference import reported_value
from verifylab.vocab import DRAFT_TOKENS, KIMI_K2_HIDDEN, allreduce_message_bytes


@dataclass(frozen=True)
class Span:
    """A value known to lie between ``low`` and ``high`` (equal when it is known)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if self.low > self.high:
            low, high = self.high, self.low
            object.__setattr__(self, "low", low)
            object.__setattr__(self, "high", high)

    @classmethod
    def of(cls, *values: float) -> Span:
        return cls(min(values), max(values))

    @property
    def mid(self) -> float:
        return (self.low + self.high) / 2

    def text(self, digits: int = 1, unit: str = "") -> str:
        """``13.5-16.2 ms``, or ``204.9 µs`` when both ends agree at that precision."""
        low, high = f"{self.low:.{digits}f}", f"{self.high:.{digits}f}"
        number = low if low == high else f"{low}-{high}"
        return f"{number} {unit}".strip()


@dataclass(frozen=True)
class Reading:
    """One consistent reading of the reported cycle."""

    name: str
    accept: float
    cycle_before_ms: float
    draft_ms: float


@dataclass(frozen=True)
class CycleAccount:
    """The case study's cycle before and after '54.1 -> 96.1 tok/s', in one set of numbers."""

    verify_ms: float
    allreduce_ms: float
    compute_ms: float
    allreduces: int
    verify_share: float
    accept_reported: float
    before_tps: float
    after_tps: float
    baseline_before_tps: float
    baseline_after_tps: float
    norm_us: float  # SGLang's separate fused add+RMSNorm kernel per all-reduce (what fusion folds in)
    norm_source: str
    readings: tuple[Reading, Reading]
    draft_tokens: tuple[int, int] = DRAFT_TOKENS
    notes: dict[str, str] = field(default_factory=dict)

    def over_readings(self, value) -> Span:
        return Span.of(*(value(r) for r in self.readings))

    @property
    def accept(self) -> Span:
        return self.over_readings(lambda r: r.accept)

    @property
    def cycle_before_ms(self) -> Span:
        return self.over_readings(lambda r: r.cycle_before_ms)

    @property
    def draft_ms(self) -> Span:
        return self.over_readings(lambda r: r.draft_ms)

    @property
    def cycle_after_ms(self) -> Span:
        """The cycle at 96.1 tok/s with the same accept length."""
        return self.over_readings(lambda r: r.accept / self.after_tps * 1e3)

    @property
    def removed_ms(self) -> Span:
        """Cycle time removed by 54.1 -> 96.1 tok/s."""
        return self.over_readings(lambda r: r.cycle_before_ms - r.accept / self.after_tps * 1e3)

    @property
    def allreduce_us_before(self) -> float:
        return self.allreduce_ms * 1e3 / self.allreduces

    @property
    def allreduce_us_after(self) -> Span:
        """Per all-reduce after, if draft, compute and count stayed as they were (what 96.1 implies)."""
        return self.over_readings(
            lambda r: (r.accept / self.after_tps * 1e3 - r.draft_ms - self.compute_ms) * 1e3 / self.allreduces
        )

    @property
    def decode_bound_us(self) -> float:
        """At most this per all-reduce in a decode step at the CUDA 13 baseline, even with zero compute."""
        return 1e6 / self.baseline_after_tps / self.allreduces

    @property
    def kernel_fusion_ms(self) -> float:
        """What folding the add+RMSNorm into the all-reduce kernel removes: one norm kernel per all-reduce."""
        return self.allreduces * self.norm_us / 1e3

    @property
    def upgrade_ms(self) -> Span:
        """From nothing to what the CUDA 12.8 -> 13 upgrade removes if it sped the EAGLE-3 cycle as it sped the
        baseline (an assumption, not a bound)."""
        factor = 1 - self.baseline_before_tps / self.baseline_after_tps
        return Span(0.0, self.cycle_before_ms.high * factor)

    @property
    def remainder_ms(self) -> Span:
        """The part of the removed time that neither kernel fusion nor the upgrade covers: unexplained."""
        removed, upgrade = self.removed_ms, self.upgrade_ms
        return Span(removed.low - self.kernel_fusion_ms - upgrade.high, removed.high - self.kernel_fusion_ms)

    @property
    def message_bytes(self) -> Span:
        return Span.of(*(allreduce_message_bytes(k, KIMI_K2_HIDDEN) for k in self.draft_tokens))

    def quantities(self) -> dict[str, tuple[Span, str, int]]:
        """Every derived quantity: key -> (value, unit, digits shown). Prose formats these and nothing else."""
        return {
            "accept": (self.accept, "", 2),
            "cycle_before_ms": (self.cycle_before_ms, "ms", 1),
            "cycle_after_ms": (self.cycle_after_ms, "ms", 1),
            "draft_ms": (self.draft_ms, "ms", 1),
            "removed_ms": (self.removed_ms, "ms", 1),
            "allreduce_us_before": (Span.of(self.allreduce_us_before), "µs", 0),
            "allreduce_us_after": (self.allreduce_us_after, "µs", 0),
            "decode_bound_us": (Span.of(self.decode_bound_us), "µs", 0),
            "kernel_fusion_ms": (Span.of(self.kernel_fusion_ms), "ms", 2),
            "norm_us": (Span.of(self.norm_us), "µs", 1),
            "upgrade_ms": (self.upgrade_ms, "ms", 1),
            "remainder_ms": (self.remainder_ms, "ms", 1),
        }

    def text(self, key: str) -> str:
        """One quantity as prose shows it (``13.5-16.2 ms``)."""
        value, unit, digits = self.quantities()[key]
        return value.text(digits, unit)


def cycle_account(ev: Evidence) -> CycleAccount:
    """The account from the reported figures and the measured norm kernel (SGLang's fused add+RMSNorm)."""
    v = lambda fid: reported_value(ev.figures, fid)  # noqa: E731
    verify, share, accept, before = (
        v("verify_total_ms"),
        v("verify_cycle_share_pct") / 100,
        v("accept_length"),
        v("eagle3_54_1"),
    )
    if not 0 < share <= 1:
        raise ModelInputError(f"verify_cycle_share_pct = {share * 100}: must be in (0, 100]")
    by_accept = Reading("accept as reported", accept, accept / before * 1e3, accept / before * 1e3 - verify)
    by_share = Reading(
        "verify share as reported", verify / share * before / 1e3, verify / share, verify / share - verify
    )
    norm_us, source = sglang_norm_us(ev, DRAFT_TOKENS[0])
    return CycleAccount(
        verify_ms=verify,
        allreduce_ms=v("verify_allreduce_ms"),
        compute_ms=v("verify_compute_ms"),
        allreduces=int(v("allreduces_per_verify")),
        verify_share=share,
        accept_reported=accept,
        before_tps=before,
        after_tps=v("eagle3_fusion_96_1"),
        baseline_before_tps=v("baseline_89_5"),
        baseline_after_tps=v("baseline_92_6"),
        norm_us=norm_us,
        norm_source=source,
        readings=(by_accept, by_share),
    )


NORM_US_ASSUMED = 2.5  # one fused add+RMSNorm kernel at k x 7168, when no run measured it


def sglang_norm_us(ev: Evidence, tokens: int) -> tuple[float, str]:
    """SGLang's unfused path runs FlashInfer's fused add+RMSNorm (one kernel) after each all-reduce: its cost,
    measured on an H200 where a run has it, else a labelled assumption."""
    measured = norm_us_measured(ev.runs, tokens)
    if measured is None:
        return NORM_US_ASSUMED, "assumption (no run measured the norm kernel)"
    us, source = measured
    return us, f"{source}, H200, k={tokens}"
