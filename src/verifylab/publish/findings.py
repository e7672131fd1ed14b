"""The findings an edition registers (records in ``finding.py``), computed from the evidence: compared across
editions by key — never by the sentence that labels them."""

from __future__ import annotations

from verifylab.analysis.facts import case_study_facts
from verifylab.analysis.recommend import recommend
from verifylab.model.answers.case_answers import reported_pass
from verifylab.model.answers.decision import regime_answer, thresholds
from verifylab.publish.finding import Finding, FindingKey
from verifylab.span import Span
from verifylab.store.evidence import Evidence
from verifylab.vocab import Regime

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
_COMPUTE = {1: FindingKey.H200_COMPUTE_K1_MS, 16: FindingKey.H200_COMPUTE_K16_MS}


def key_findings(ev: Evidence) -> list[Finding]:
    """The figures and recommendations a reader would cite (compared across editions by key)."""
    cycle = reported_pass(ev).account
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


def _span_finding(
    key: FindingKey, label: str, span, unit: str, digits: int, provenance: str, signed: bool = False
) -> Finding:
    """A range finding; ``signed``: a saving that may be a loss, in words (``anything from a 1.5 ms loss to ...``)."""
    return Finding(
        key=key,
        label=label,
        value=round(span.mid, digits + 1),
        low=round(span.low, digits + 1),
        high=round(span.high, digits + 1),
        text=span.gain_text(digits, unit) if signed else span.text(digits, unit),
        unit=unit,
        provenance=provenance,
    )


def _model_findings(ev: Evidence) -> list[Finding]:
    """The regime-level numbers the decision page cites (modelled within floors)."""

    reported = reported_pass(ev)
    floor, allreduce = reported.floor_ms, reported.allreduce_us
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
            allreduce,
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
                signed=True,
            )
        )
    return out
