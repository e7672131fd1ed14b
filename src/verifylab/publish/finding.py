"""A finding an edition registers, as a typed record (a key from an enum, the number as a field, its unit and
provenance), and reading registries written before findings were typed. Light: the registry reads these without
the analysis that computes them (``findings.py``)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from verifylab.analysis.recommendation import Topic


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
