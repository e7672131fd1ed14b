"""One account of the case study's EAGLE-3 cycle: built once from the reported figures, every unresolved choice
kept as a range, every derived quantity computed here and nowhere else.

The figures that come together are paired together: seed 000 reports the ~30 ms verify pass, its 97 % share of
the cycle and the accept length of ~2.0 with the drafter's 60 tok/s. At 60 tok/s and an accept length of 2.0 the
cycle is 33.3 ms, the verify pass 90 % of it (97 % as reported: the figures are rounded) and the draft phase the
remaining 3.3 ms. The "before" of the jump was measured in other sessions at 54.1 and 54.8 tok/s (seeds 002 and
001): a stated range, read with the same accept length and draft phase. The bottom line: EAGLE-3 with "fusion"
(96.1 tok/s) against plain decoding (92.6) is +3.8 %. Nothing is solved so that a figure comes out: what the
measured factors do not cover is the *unexplained remainder*.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from verifylab.derived import derived
from verifylab.errors import ModelInputError
from verifylab.model.inputs.stored import StoredInputs
from verifylab.model.pricing.pass_cost import PassCost, compare
from verifylab.reported import reported_value
from verifylab.span import Span
from verifylab.vocab import DRAFT_TOKENS, KIMI_K2_HIDDEN, allreduce_message_bytes


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
    drafter_tps: float = 60.0  # the rate reported with the 30 ms verify pass and accept ~2.0 (seed 000)
    notes: dict[str, str] = field(default_factory=dict, hash=False)  # said of the numbers, not one of them

    def jump_text(self) -> str:
        """The reported jump as prose shows it, from its two figures: ``54.1 -> 96.1 tok/s``."""
        return f"{self.before_tps:g} -> {self.after_tps:g} tok/s"

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
    def before_tps_range(self) -> Span:
        """EAGLE-3 before the jump, as the sessions measured it (54.1 and 54.8 tok/s)."""
        return self.over_readings(lambda r: r.accept / r.cycle_before_ms * 1e3)

    @property
    def verify_share_consistent(self) -> float:
        """The verify pass's share of the cycle the 60 tok/s session implies (reported: 97 %)."""
        return self.verify_ms / (self.accept_reported / self.drafter_tps * 1e3)

    @property
    def bottom_line_pct(self) -> float:
        """EAGLE-3 with "fusion" against plain decoding on the same stack, in percent."""
        return (self.after_tps / self.baseline_after_tps - 1) * 100

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
        """What folding the add+RMSNorm into the all-reduce kernel removes: the reported verify pass against the same
        pass without one norm kernel per all-reduce."""
        reported = PassCost(self.draft_tokens[0], 1, measured_ms=self.compute_ms, collectives_ms=self.allreduce_ms)
        norms = self.allreduces * self.norm_us / 1e3
        return compare(reported, replace(reported, measured_ms=self.compute_ms - norms)).saved_ms

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
            "before_tps": (self.before_tps_range, "tok/s", 1),
            "verify_share_consistent": (Span.of(self.verify_share_consistent * 100), "%", 0),
            "bottom_line_pct": (Span.of(self.bottom_line_pct), "%", 1),
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


@derived
def cycle_account(stored: StoredInputs) -> CycleAccount:
    """The account from the reported figures and the measured norm kernel (SGLang's fused add+RMSNorm)."""
    v = lambda fid: reported_value(stored.figures, fid)  # noqa: E731
    verify, share, accept = v("verify_total_ms"), v("verify_cycle_share_pct") / 100, v("accept_length")
    if not 0 < share <= 1:
        raise ModelInputError(f"verify_cycle_share_pct = {share * 100}: must be in (0, 100]")
    draft = accept / v("eagle3_60") * 1e3 - verify  # the session that reported 30 ms, ~2.0 and 60 tok/s
    if draft <= 0:
        raise ModelInputError(f"accept {accept} at {v('eagle3_60')} tok/s leaves no time for the draft phase")
    readings = tuple(
        Reading(f"{tps:.1f} tok/s before ({seed})", accept, accept / tps * 1e3, draft)
        for tps, seed in ((v("eagle3_54_1"), "seed 002"), (v("eagle3_54_8"), "seed 001"))
    )
    norm_us, source = sglang_norm_us(stored, DRAFT_TOKENS[0])
    return CycleAccount(
        verify_ms=verify,
        allreduce_ms=v("verify_allreduce_ms"),
        compute_ms=v("verify_compute_ms"),
        allreduces=int(v("allreduces_per_verify")),
        verify_share=share,
        accept_reported=accept,
        before_tps=v("eagle3_54_1"),
        after_tps=v("eagle3_fusion_96_1"),
        baseline_before_tps=v("baseline_89_5"),
        baseline_after_tps=v("baseline_92_6"),
        norm_us=norm_us,
        norm_source=source,
        readings=readings,  # type: ignore[arg-type]
        drafter_tps=v("eagle3_60"),
    )


NORM_US_ASSUMED = 2.5  # one fused add+RMSNorm kernel at k x 7168, when no run measured it


def sglang_norm_us(stored: StoredInputs, tokens: int) -> tuple[float, str]:
    """SGLang's unfused path runs FlashInfer's fused add+RMSNorm (one kernel) after each all-reduce: its cost,
    measured on an H200 where a run has it, else a labelled assumption."""
    norm = stored.runs.norm
    if norm is None:
        return NORM_US_ASSUMED, "assumption (no run measured the norm kernel)"
    return norm.at(tokens), f"{norm.source}, H200, k={tokens}"
