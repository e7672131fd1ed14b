"""The findings an edition registers: typed records (a key from an enum, the number as a field, its unit and
provenance), compared across editions by key — never by the sentence that labels them."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from verifylab.analysis.facts import case_study_facts
from verifylab.analysis.recommend import recommend
from verifylab.analysis.recommendation import Topic
from verifylab.model.case import account
from verifylab.store.evidence import Evidence


class FindingKey(StrEnum):
    """A number a reader cites; the value is its stable key in ``book/editions.json``."""

    VERIFY_ALLREDUCE_US = "verify_allreduce_us"
    DECODE_ALLREDUCE_BOUND_US = "decode_allreduce_bound_us"
    ACCEPT_LENGTH = "accept_length"
    CYCLE_TIME_REMOVED_MS = "cycle_time_removed_ms"
    ALLREDUCE_US_AFTER = "allreduce_us_after"
    KERNEL_FUSION_SHARE_MS = "kernel_fusion_share_ms"
    UPGRADE_SHARE_MS = "upgrade_share_ms"
    UNEXPLAINED_REMAINDER_MS = "unexplained_remainder_ms"
    SUBSTITUTION_SHARE_MS = "substitution_share_ms"  # editions before the cycle account only
    KERNEL_FUSION_ONLY_VERIFY_MS = "kernel_fusion_only_verify_ms"
    H200_COMPUTE_K1_MS = "h200_compute_k1_ms"
    H200_COMPUTE_K16_MS = "h200_compute_k16_ms"
    BOTTOM_LINE_PCT = "bottom_line_pct"
    VERIFY_COMPUTE_FLOOR_MS = "verify_compute_floor_ms"
    ALLREDUCE_AS_REPORTED_US = "allreduce_as_reported_us"
    ALLREDUCE_HEALTHY_US = "allreduce_healthy_p2p_us"
    ALLREDUCE_HOST_MEMORY_US = "allreduce_host_memory_us"
    FUSION_GAIN_HEALTHY_MS = "fusion_gain_healthy_p2p_ms"


class Finding(BaseModel):
    """One registered finding: a number (``FindingKey``) or a recommendation (``Topic``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: FindingKey | Topic
    label: str  # how the summary and the changes page name it
    value: float | str
    low: float | None = None  # a range: value is its middle
    high: float | None = None
    text: str | None = None  # the value as prose shows it ("13.5-16.2 ms")
    unit: str = ""
    provenance: str
    confidence: str | None = None  # recommendations only

    @property
    def shown(self) -> str:
        """The value as the summary and the changes page show it (a recommendation with its confidence)."""
        if self.confidence:
            return f"[{self.confidence}] {self.value}"
        return self.text or str(self.value)


# account quantity -> finding (labels are what the summary and the changes page show)
_ACCOUNT = {
    FindingKey.VERIFY_ALLREDUCE_US: ("allreduce_us_before", "verify all-reduce latency (us, reported-derived)"),
    FindingKey.DECODE_ALLREDUCE_BOUND_US: ("decode_bound_us", "decode all-reduce upper bound (us)"),
    FindingKey.ACCEPT_LENGTH: ("accept", "accept length (reported with the 60 tok/s drafter)"),
    FindingKey.CYCLE_TIME_REMOVED_MS: ("removed_ms", "cycle time removed 54.1 -> 96.1 (ms)"),
    FindingKey.ALLREDUCE_US_AFTER: ("allreduce_us_after", "per-all-reduce latency implied after (us)"),
    FindingKey.KERNEL_FUSION_SHARE_MS: ("kernel_fusion_ms", "kernel-fusion share (ms)"),
    FindingKey.UPGRADE_SHARE_MS: ("upgrade_ms", "CUDA-upgrade share if proportional (ms, assumption)"),
    FindingKey.UNEXPLAINED_REMAINDER_MS: ("remainder_ms", "unexplained remainder (ms)"),
    FindingKey.BOTTOM_LINE_PCT: ("bottom_line_pct", "EAGLE-3 with fusion vs plain decoding (%)"),
}
_LEGACY_LABELS = {  # the English keys of registries written before findings were typed
    "verify all-reduce latency (us, reported-derived)": (FindingKey.VERIFY_ALLREDUCE_US, "us", "reported-derived"),
    "decode all-reduce upper bound (us)": (FindingKey.DECODE_ALLREDUCE_BOUND_US, "us", "reported-derived"),
    "cycle time removed 54.1 -> 96.1 (ms)": (FindingKey.CYCLE_TIME_REMOVED_MS, "ms", "reported-derived"),
    "kernel-fusion share (ms)": (FindingKey.KERNEL_FUSION_SHARE_MS, "ms", "modelled"),
    "algorithm-substitution share (ms)": (FindingKey.SUBSTITUTION_SHARE_MS, "ms", "modelled"),
    "kernel-fusion-only verify (ms, modelled)": (FindingKey.KERNEL_FUSION_ONLY_VERIFY_MS, "ms", "modelled"),
    "H200 compute per TP-8 pass, k=1 (ms, measured)": (FindingKey.H200_COMPUTE_K1_MS, "ms", "measured"),
    "H200 compute per TP-8 pass, k=16 (ms, measured)": (FindingKey.H200_COMPUTE_K16_MS, "ms", "measured"),
}
_COMPUTE = {1: FindingKey.H200_COMPUTE_K1_MS, 16: FindingKey.H200_COMPUTE_K16_MS}


def key_findings(ev: Evidence) -> list[Finding]:
    """The figures and recommendations a reader would cite (compared across editions by key)."""
    cycle = account(ev)
    found = []
    for key, (quantity, label) in _ACCOUNT.items():
        span, unit, digits = cycle.quantities()[quantity]
        found.append(
            Finding(
                key=key,
                label=label,
                value=round(span.mid, digits + 1),
                low=round(span.low, digits + 1),
                high=round(span.high, digits + 1),
                text=cycle.text(quantity),
                unit=unit,
                provenance="modelled from reported figures (cycle account)",
            )
        )
    found += _model_findings(ev)
    run_id = ev.newest_with("shard_compute")
    if run_id:
        compute = ev.runs.read_table(run_id, "shard_compute")
        for tokens, key in _COMPUTE.items():
            row = compute[(compute.tokens == tokens) & (compute.norm == "unfused")]
            if not row.empty:
                found.append(
                    Finding(
                        key=key,
                        label=f"H200 compute per TP-8 pass, k={tokens} (ms, measured)",
                        value=round(float(row.pass_ms_61_layers.iloc[0]), 2),
                        unit="ms",
                        provenance=f"measured: run {run_id}",
                    )
                )
    for rec in recommend(case_study_facts(ev)):
        found.append(
            Finding(
                key=rec.topic,
                label=f"recommendation: {rec.topic.value}",
                value=rec.recommendation,
                provenance=", ".join(rec.provenance) or "none",
                confidence=rec.confidence,
            )
        )
    return found


def _span_finding(key: FindingKey, label: str, span, unit: str, digits: int, provenance: str) -> Finding:
    return Finding(
        key=key,
        label=label,
        value=round(span.mid, digits + 1),
        low=round(span.low, digits + 1),
        high=round(span.high, digits + 1),
        text=span.text(digits, unit),
        unit=unit,
        provenance=provenance,
    )


def _model_findings(ev: Evidence) -> list[Finding]:
    """The regime-level numbers the decision page cites (modelled within floors)."""
    from verifylab.model.case import inputs
    from verifylab.model.cycle import Span
    from verifylab.model.decision import regime_answer, thresholds
    from verifylab.model.options import reported_pass_floor
    from verifylab.vocab import Regime

    a = account(ev)
    low, high, _ = inputs(ev).curves.reported_allreduce or (0.0, 0.0, 0.0)
    floor = reported_pass_floor(a)
    bands = thresholds(ev)
    healthy, host = bands[Regime.HEALTHY_P2P.value], bands[Regime.HOST_MEMORY.value]
    gain = regime_answer(ev, Regime.HEALTHY_P2P).fusion_gain_ms
    out = [
        _span_finding(
            FindingKey.VERIFY_COMPUTE_FLOOR_MS,
            "verify compute floor at peak bandwidth (ms)",
            floor,
            "ms",
            1,
            "modelled",
        ),
        _span_finding(
            FindingKey.ALLREDUCE_AS_REPORTED_US,
            "verify all-reduce as reported, compute at its floor (us)",
            Span(low, high),
            "µs",
            0,
            "modelled from reported figures",
        ),
        _span_finding(
            FindingKey.ALLREDUCE_HEALTHY_US,
            "8-rank all-reduce at 57 KB, healthy PCIe P2P (us)",
            Span(healthy.low_us, healthy.high_us),
            "µs",
            0,
            "reported (public), modelled",
        ),
        _span_finding(
            FindingKey.ALLREDUCE_HOST_MEMORY_US,
            "8-rank all-reduce at 57 KB, host memory (us)",
            Span(host.low_us, host.high_us),
            "µs",
            0,
            "measured (2 x H200), modelled",
        ),
    ]
    if gain is not None:
        out.append(
            _span_finding(
                FindingKey.FUSION_GAIN_HEALTHY_MS,
                "fusion saving per verify pass, healthy P2P (ms)",
                gain,
                "ms",
                2,
                "modelled",
            )
        )
    return out


def by_key(findings: list[Finding]) -> dict[str, Finding]:
    return {str(f.key.value): f for f in findings}


def from_legacy(findings: dict[str, object]) -> list[Finding]:
    """Findings of a registry written before they were typed (``{English label: value}``), as records; a label
    that names no known finding is an error naming it."""
    out = []
    for label, value in findings.items():
        if label.startswith("recommendation: "):
            confidence, _, text = str(value).partition("] ")
            topic = Topic(label.removeprefix("recommendation: "))
            out.append(
                Finding(
                    key=topic, label=label, value=text, provenance="not recorded", confidence=confidence.lstrip("[")
                )
            )
        elif label in _LEGACY_LABELS:
            key, unit, provenance = _LEGACY_LABELS[label]
            number_or_text = value if isinstance(value, (int, float)) else str(value)
            out.append(Finding(key=key, label=label, value=number_or_text, unit=unit, provenance=provenance))
        else:
            raise ValueError(f"finding {label!r} has no key")
    return out
