"""The findings an edition registers: typed records (a key from an enum, the number as a field, its unit and
provenance), compared across editions by key — never by the sentence that labels them."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from verifylab.model.case import reconcile_table, whatif_table
from verifylab.report.recommend import Topic, case_study_facts, recommend
from verifylab.store.evidence import Evidence


class FindingKey(StrEnum):
    """A number a reader cites; the value is its stable key in ``book/editions.json``."""

    VERIFY_ALLREDUCE_US = "verify_allreduce_us"
    DECODE_ALLREDUCE_BOUND_US = "decode_allreduce_bound_us"
    CYCLE_TIME_REMOVED_MS = "cycle_time_removed_ms"
    KERNEL_FUSION_SHARE_MS = "kernel_fusion_share_ms"
    SUBSTITUTION_SHARE_MS = "substitution_share_ms"
    KERNEL_FUSION_ONLY_VERIFY_MS = "kernel_fusion_only_verify_ms"
    H200_COMPUTE_K1_MS = "h200_compute_k1_ms"
    H200_COMPUTE_K16_MS = "h200_compute_k16_ms"


class Finding(BaseModel):
    """One registered finding: a number (``FindingKey``) or a recommendation (``Topic``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: FindingKey | Topic
    label: str  # how the summary and the changes page name it
    value: float | str
    unit: str = ""
    provenance: str
    confidence: str | None = None  # recommendations only

    @property
    def shown(self) -> str:
        """The value as the changes page shows it (a recommendation with its confidence)."""
        return f"[{self.confidence}] {self.value}" if self.confidence else str(self.value)


# reconciliation step -> finding; what-if kind -> finding (the rows are the model's, the keys are ours)
_RECONCILED = {
    FindingKey.VERIFY_ALLREDUCE_US: (
        "latency per all-reduce in verify",
        "verify all-reduce latency (us, reported-derived)",
        "us",
        1,
    ),
    FindingKey.DECODE_ALLREDUCE_BOUND_US: (
        "upper bound per all-reduce in decode",
        "decode all-reduce upper bound (us)",
        "us",
        1,
    ),
    FindingKey.CYCLE_TIME_REMOVED_MS: (
        "cycle time removed by 54.1 -> 96.1 tok/s (accept length unchanged)",
        "cycle time removed 54.1 -> 96.1 (ms)",
        "ms",
        2,
    ),
    FindingKey.KERNEL_FUSION_SHARE_MS: ("share kernel fusion could carry", "kernel-fusion share (ms)", "ms", 2),
    FindingKey.SUBSTITUTION_SHARE_MS: (
        "left for algorithm substitution",
        "algorithm-substitution share (ms)",
        "ms",
        2,
    ),
}
_COMPUTE = {1: FindingKey.H200_COMPUTE_K1_MS, 16: FindingKey.H200_COMPUTE_K16_MS}


def key_findings(ev: Evidence) -> list[Finding]:
    """The figures and recommendations a reader would cite (compared across editions by key)."""
    steps = reconcile_table(ev).set_index("step")["value"]
    found = [
        Finding(key=key, label=label, value=round(float(steps[step]), digits), unit=unit, provenance="reported-derived")
        for key, (step, label, unit, digits) in _RECONCILED.items()
    ]
    verify = whatif_table(ev).set_index("kind")["verify_ms"]
    found.append(
        Finding(
            key=FindingKey.KERNEL_FUSION_ONLY_VERIFY_MS,
            label="kernel-fusion-only verify (ms, modelled)",
            value=round(float(verify["kernel_fusion"]), 2),
            unit="ms",
            provenance="modelled",
        )
    )
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


def by_key(findings: list[Finding]) -> dict[str, Finding]:
    return {str(f.key.value): f for f in findings}


def from_legacy(findings: dict[str, object]) -> list[Finding]:
    """Findings of a registry written before they were typed (``{English label: value}``), as records; a label
    that names no known finding is an error naming it."""
    labels = {label: (key, unit, "reported-derived") for key, (_, label, unit, _) in _RECONCILED.items()}
    labels["kernel-fusion-only verify (ms, modelled)"] = (FindingKey.KERNEL_FUSION_ONLY_VERIFY_MS, "ms", "modelled")
    labels |= {
        f"H200 compute per TP-8 pass, k={k} (ms, measured)": (key, "ms", "measured (run not recorded)")
        for k, key in _COMPUTE.items()
    }
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
        elif label in labels:
            key, unit, provenance = labels[label]
            out.append(Finding(key=key, label=label, value=value, unit=unit, provenance=provenance))
        else:
            raise ValueError(f"finding {label!r} has no key")
    return out
