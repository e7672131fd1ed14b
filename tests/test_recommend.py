"""Recommendation rules on contrasting evidence sets."""

import shlex
from dataclasses import replace

from verifylab.analysis.facts import DeploymentFacts as Facts
from verifylab.analysis.recommend import recommend, recommendations_frame
from verifylab.launch import LaunchTarget
from verifylab.model.inputs.stored import stored_inputs
from verifylab.server.variants import BaseConfig

BASE = BaseConfig(model_path="/models/kimi", tp_size=8, draft_model_path="/models/eagle3")
# an SGLang that takes every option these commands use (the builder refuses any other)
TARGET = LaunchTarget(
    "a test SGLang",
    frozenset(
        {
            "--model-path", "--tp-size", "--host", "--port", "--speculative-algorithm",
            "--speculative-draft-model-path",
            "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
            "--enforce-disable-flashinfer-allreduce-fusion", "--flashinfer-allreduce-fusion-backend",
        }
    ),
)  # fmt: skip


def by_topic(ev: Facts) -> dict:
    return {r.topic: r for r in recommend(replace(ev, launch_target=ev.launch_target or TARGET))}


def test_speculation_wins_everywhere():
    rec = by_topic(Facts(crossover={"status": "wins everywhere", "run_id": "r1"}))["speculation vs load"]
    assert rec.recommendation.startswith("Keep EAGLE-3 on") and rec.confidence == "high"
    assert "run r1 (sweep)" in rec.evidence


def test_crossover_inside_the_range():
    ev = Facts(crossover={"status": "crosses", "estimate": 24.0, "bracket": (16, 32), "run_id": "r2"}, base=BASE)
    recs = by_topic(ev)
    assert "up to 16 concurrent requests" in recs["speculation vs load"].recommendation
    assert "from 32 up" in recs["speculation vs load"].recommendation
    assert "--speculative-algorithm EAGLE3" in recs["launch command"].command


def test_speculation_loses_everywhere_switches_the_command():
    recs = by_topic(Facts(crossover={"status": "loses everywhere", "run_id": "r3"}, base=BASE))
    assert recs["speculation vs load"].recommendation.startswith("Turn EAGLE-3 off")
    assert "--speculative-algorithm" not in recs["launch command"].command


def test_command_without_a_draft_model_uses_a_named_placeholder():
    # a live run on a box with no EAGLE-3 draft (the live smoke) used to fail chapter 05 with a ServerError
    base = BaseConfig(model_path="/models/tiny", tp_size=1)
    rec = by_topic(Facts(crossover={"status": "wins everywhere", "run_id": "r1"}, base=base))["launch command"]
    args = shlex.split(rec.command)  # quoted for the shell: the placeholder is one argument
    assert args[args.index("--speculative-draft-model-path") + 1] == "<EAGLE-3-draft-path>"
    assert "No draft model was given" in rec.recommendation


def test_fusion_inactive_is_not_counted_on():
    rec = by_topic(
        Facts(fusion_state={"active": False, "reasons": "fusion skipped by the workspace preflight", "run_id": "r4"})
    )["all-reduce fusion"]
    assert rec.recommendation.startswith("Fusion does not act on this box") and rec.confidence == "high"


def test_no_evidence_says_so_and_names_the_measurement():
    recs = by_topic(Facts())
    for topic in ("speculation vs load", "all-reduce fusion", "architecture gates"):
        assert recs[topic].confidence == "none"
        assert recs[topic].measure_next
    assert recs["launch command"].recommendation.startswith("No model path")


def test_reported_only_evidence_is_low_confidence(shipped):
    from verifylab.model.case.cycle import cycle_account

    account = cycle_account(stored_inputs(shipped))
    recs = by_topic(
        Facts(
            reported_liability_concurrency=30,
            reported_fusion={"eagle3": 54.1, "eagle3_fusion": 96.1, "baseline": 92.6, "fusion_runs": (92.6, 93.1)},
            account=account,
            flashinfer_version="0.6.4",
            interconnect="PCIe",
            gates_closed=["communicator.py : x"],
        )
    )
    assert recs["speculation vs load"].confidence == "low" and "Reported:" in recs["speculation vs load"].recommendation
    fusion = recs["all-reduce fusion"]
    assert fusion.provenance == ["reported", "modelled"] and fusion.confidence == "low"
    assert f"kernel fusion removes {account.text('kernel_fusion_ms')}" in fusion.recommendation
    assert account.text("bottom_line_pct") in fusion.recommendation and "comm probe" in fusion.measure_next
    gates = recs["architecture gates"]
    assert gates.command.startswith("verifylab gates apply") and gates.confidence == "medium"  # never run on SM120
    assert "risk: FlashInfer version" in recs and "risk: no NVLink multicast" in recs
    assert "above 512 concurrent requests" in recs["risk: fusion batch limit"].recommendation


def test_the_case_study_decision_is_conditional_on_the_regime(shipped):
    """With the model: fusion is recommended for healthy P2P with the numbers of the decision table, refused
    without P2P; one upgrade target; the gates to open are the target's."""
    from verifylab.analysis.facts import case_study_facts
    from verifylab.model.answers.decision import thresholds
    from verifylab.vocab import Regime

    ev = shipped
    facts = case_study_facts(ev)
    recs = by_topic(facts)
    fusion = recs["all-reduce fusion"].recommendation
    band = thresholds(ev)[Regime.HEALTHY_P2P.value]
    assert f"{band.low_us:.0f}-{band.high_us:.0f} µs (healthy P2P)" in fusion
    assert "SGLang 0.5.22 (FlashInfer 0.7.1)" in fusion and "fix P2P first" in fusion
    gates = recs["architecture gates"].recommendation
    assert gates.startswith("Upgrade SGLang 0.5.9 to 0.5.22") and "flashinfer_comm_fusion.py" in gates
    assert facts.upgrade == ("0.5.22", "0.7.1")


def test_frame_has_every_recommendation_with_evidence_column():
    frame = recommendations_frame(recommend(Facts(crossover={"status": "wins everywhere", "run_id": "r"})))
    assert {"topic", "recommendation", "confidence", "evidence", "measure_next"} <= set(frame.columns)
    assert (frame["evidence"] != "").all()


def test_evidence_from_the_shipped_data(shipped):
    from verifylab.analysis.facts import facts_from_evidence

    ev = facts_from_evidence(
        shipped, sglang_version="0.5.9", flashinfer_version="0.6.4", interconnect="PCIe", base=BASE
    )
    assert ev.reported_liability_concurrency == 30
    assert ev.gates_closed and any("communicator.py" in g for g in ev.gates_closed)
    assert ev.crossover is None  # no measured sweep shipped: the rules fall back to reported, low confidence
