"""Recommendations derived from evidence, as rules with tests: what to deploy, with which flags, when to turn
speculation off, which gates to open, which risks apply. Every recommendation cites its evidence and its
confidence; where evidence is missing or only reported, it says so and names the measurement to make."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd

from verifylab.analysis.facts import DeploymentFacts
from verifylab.analysis.launch_command import launch_command
from verifylab.analysis.recommendation import Recommendation, Topic, no_evidence
from verifylab.model.answers.decision import crossover_text, fusion_at_one_stream, fusion_by_load_words
from verifylab.model.views import REGIME_TITLE
from verifylab.report.section import Prose
from verifylab.vocab import (
    COMMAND_DRAFT_TOKENS,
    FLASHINFER_JIT_ADMITS_SM12X,
    SGLANG_FUSION_MAX_TOKENS,
    Regime,
    flashinfer_workspace_needs_multicast,
    version_at_least,
)


def _speculation(ev: DeploymentFacts) -> Recommendation:
    if ev.crossover and ev.crossover.get("status") not in (None, "no data"):
        run = ev.crossover.get("run_id", "?")
        status = ev.crossover["status"]
        if status == "wins everywhere":
            return Recommendation(
                Topic.SPECULATION,
                "Keep EAGLE-3 on at every tested concurrency: it is "
                "resolved faster everywhere measured; extend the sweep upwards to find its limit.",
                [f"run {run} (sweep)", "chapter 2"],
                "high",
                measure_next="sweep to higher C",
                provenance=["measured"],
            )
        if status == "loses everywhere":
            return Recommendation(
                Topic.SPECULATION,
                "Turn EAGLE-3 off: it is resolved slower at every tested concurrency, even one stream.",
                [f"run {run} (sweep)", "chapter 2"],
                "high",
                provenance=["measured"],
                keep_speculation=False,
            )
        if status == "crosses":
            lo, hi = ev.crossover["bracket"]
            return Recommendation(
                Topic.SPECULATION,
                f"Use EAGLE-3 up to {lo} concurrent requests and the non-speculative deployment from {hi} up "
                f"(crossover ~{ev.crossover['estimate']:.0f}, resolved between {lo} and {hi}). SGLang does not switch "
                "speculation by load at run time (an adaptive option that reacts to acceptance is not the same): "
                "route by load between a speculative and a non-speculative server.",
                [f"run {run} (sweep)", "chapter 2"],
                "high",
                provenance=["measured"],
            )
        return Recommendation(
            Topic.SPECULATION,
            "The measured sweep does not resolve a difference: more requests per cell are needed before deciding.",
            [f"run {run} (sweep)"],
            "low",
            measure_next="repeat the sweep with more requests per cell",
            provenance=["measured"],
        )
    if ev.reported_liability_concurrency:
        modelled = ""
        if ev.answers:
            modelled = (
                " Modelled (uniform expert routing, the most experts a pass can read): "
                + "; ".join(f"{REGIME_TITLE[g]}: {crossover_text(a)}" for g, a in ev.answers.items())
                + " — real routing reads fewer distinct experts and moves the crossover up."
            )
        return Recommendation(
            Topic.SPECULATION,
            f"Reported: speculation becomes a liability from about {ev.reported_liability_concurrency:.0f} "
            f"concurrent requests.{modelled} Route loads above the crossover to a non-speculative server, and "
            "measure it first (chapter 2's sweep).",
            ["reported: seed 002 ('C≥30')", "chapter 2", "chapter 4 (modelled)"],
            "low",
            measure_next="verifylab sweep on both variants (chapter 2, live mode) to find the crossover with its "
            "interval",
            provenance=["reported"],
        )
    return no_evidence(
        Topic.SPECULATION,
        "No evidence on how speculation behaves under load.",
        "verifylab sweep on the speculative and non-speculative variants",
    )


def _fusion(ev: DeploymentFacts) -> Recommendation:
    if ev.fusion_state is not None:
        run = ev.fusion_state.get("run_id", "?")
        if not ev.fusion_state.get("active", False):
            return Recommendation(
                Topic.FUSION,
                f"Fusion does not act on this box: {ev.fusion_state.get('reasons')}. Do not "
                "count on it; the verify pass stays on NCCL.",
                [f"run {run} (variant state)", "chapter 2"],
                "high",
                measure_next="on PCIe, check the log for 'Skipping allreduce fusion'; only fused kernel names in a "
                "profile prove fusion runs (chapter 3)",
                provenance=["measured"],
            )
        return Recommendation(
            Topic.FUSION,
            "Fusion is active on this box: deploy EAGLE-3 with fusion, and confirm fused kernels in a profile.",
            [f"run {run}", "chapter 3"],
            "medium",
            provenance=["measured"],
        )
    if ev.reported_fusion and ev.account and ev.answers:
        r, a = ev.reported_fusion, ev.account
        healthy = ev.answers.get(Regime.HEALTHY_P2P)
        band = ev.thresholds.get(Regime.HEALTHY_P2P.value)
        slow = ev.thresholds.get(Regime.HOST_MEMORY.value)
        upgrade = f"SGLang {ev.upgrade[0]} (FlashInfer {ev.upgrade[1]})" if ev.upgrade else "a version chapter 1 lists"
        gain = healthy.fusion_gain_ms.gain_text(2, "ms") if healthy and healthy.fusion_gain_ms else "not priced"
        verdict = fusion_at_one_stream(healthy.fusion_gain_ms if healthy else None, COMMAND_DRAFT_TOKENS)
        by_load = fusion_by_load_words(healthy) if healthy else "not priced"
        fused_tps = healthy.fused_tps.text(0, "tok/s") if healthy and healthy.fused_tps else "?"
        eagle_tps = healthy.eagle_tps.text(0, "tok/s") if healthy else "?"
        return Recommendation(
            Topic.FUSION,
            f"If the box's 8-rank all-reduce of one stream's verify message costs "
            f"{_band(band)} (healthy P2P), fusion for EAGLE-3: {verdict} (upgrade to {upgrade} and open its gates "
            f"to run it): {gain} per verify pass ({eagle_tps} -> {fused_tps}, modelled). By load, per verify pass "
            f"(chapter 4's fusion-by-load table): {by_load}; past the public crossover the one-shot push over PCIe "
            f"loses to NCCL, so turn fusion off where it says off. If it costs {_band(slow)} (host memory) or more, "
            f"fusion cannot help: its kernel needs working P2P; fix P2P first. The reported {r['eagle3']:.1f} -> "
            f"{r['eagle3_fusion']:.1f} tok/s is not the fusion's: "
            f"kernel fusion removes {a.text('kernel_fusion_ms')} of the {a.text('removed_ms')} per cycle, and "
            f"EAGLE-3 with 'fusion' beat plain decoding by {a.text('bottom_line_pct')} ({r['eagle3_fusion']:.1f} vs "
            f"{r['baseline']:.1f} tok/s).",
            ["chapter 4 (options per regime, modelled)", "chapter 1 (forensics, audited wheels)", "public table"],
            "medium" if verdict.startswith(("yes", "no")) else "low",  # an unresolved range: low
            measure_next="`verifylab comm probe` on the box (its regime), then EAGLE-3 with and without fusion "
            "on the upgraded stack, profiled",
            provenance=["modelled", "reported (public)", "audited"],
        )
    if ev.reported_fusion and ev.account:  # reported figures, no regime model
        r, a = ev.reported_fusion, ev.account
        return Recommendation(
            Topic.FUSION,
            f"Reported only: {r['eagle3']:.1f} -> {r['eagle3_fusion']:.1f} tok/s, {a.text('bottom_line_pct')} over "
            f"plain decoding; kernel fusion removes {a.text('kernel_fusion_ms')} of the {a.text('removed_ms')} per "
            "cycle. Whether fusion pays depends on the box's communication regime: measure it first.",
            ["reported: seeds 000-002", "chapter 4 (cycle account, modelled)"],
            "low",
            measure_next="`verifylab comm probe` on the box",
            provenance=["reported", "modelled"],
        )
    return no_evidence(
        Topic.FUSION, "No evidence about fusion on this box.", "run the fusion and baseline variants (chapter 2)"
    )


def _gates(ev: DeploymentFacts) -> Recommendation:
    if ev.gates_closed is None:
        return no_evidence(
            Topic.GATES, "The installed SGLang was not audited.", "verifylab gates audit --root <site-packages>"
        )
    if ev.upgrade and ev.sglang_version and ev.sglang_version != ev.upgrade[0] and ev.upgrade_gates_closed:
        return Recommendation(
            Topic.GATES,
            f"Upgrade SGLang {ev.sglang_version} to {ev.upgrade[0]} (it pins FlashInfer {ev.upgrade[1]}); then open "
            f"its {len(ev.upgrade_gates_closed)} gate(s) with `verifylab gates apply --arch sm120` and check them "
            "with `verifylab gates verify` (revert with `verifylab gates revert`): "
            + "; ".join(ev.upgrade_gates_closed)
            + (
                f". Of these, what keeps fusion off on a PCIe SM120 box is {ev.upgrade_fusion_blockers} (chapter 1's "
                "table of pairs)"
                if ev.upgrade_fusion_blockers
                else ""
            )
            + f". Opening the {len(ev.gates_closed)} gate(s) of {ev.sglang_version} instead leaves FlashInfer's JIT "
            "list closed. Which gates is audited; that the opened path runs on SM120 is not: no SM120 GPU ran it.",
            ["gates audit of the published wheels", "chapter 1"],
            "medium",
            command="verifylab gates apply --arch sm120 --root <site-packages of the upgraded install>",
            provenance=["audited"],
        )
    if not ev.gates_closed:
        return Recommendation(
            Topic.GATES,
            "No gate keeps the target architecture out in the audited install.",
            ["gates audit", "chapter 1"],
            "high",
            provenance=["audited"],
        )
    return Recommendation(
        Topic.GATES,
        f"SGLang {ev.sglang_version or '?'}: open {len(ev.gates_closed)} gate(s) with `verifylab gates apply`, "
        "then `verifylab gates verify` (revert with `verifylab gates revert`): "
        + "; ".join(ev.gates_closed)
        + ". Which gates is audited; that the opened path runs on SM120 is not: no SM120 GPU ran it.",
        ["gates audit", "chapter 1"],
        "medium",
        command="verifylab gates apply --root <site-packages>",
        provenance=["audited"],
    )


def _risks(ev: DeploymentFacts) -> list[Recommendation]:
    out = []
    if ev.flashinfer_version and not version_at_least(ev.flashinfer_version, FLASHINFER_JIT_ADMITS_SM12X):
        out.append(
            Recommendation(
                Topic.RISK_FLASHINFER_VERSION,
                f"FlashInfer {ev.flashinfer_version} predates SM12x support ({FLASHINFER_JIT_ADMITS_SM12X}): "
                "opening its JIT list compiles for sm_120a (measured on an H200 machine) but running is untested.",
                [f"sm120 build check run {ev.sm120_build_run or '(not stored)'}", "chapter 1"],
                "medium",
                measure_next="upgrade to FlashInfer >= 0.6.17",
                provenance=["measured"],
            )
        )
    if ev.flashinfer_version and ev.flashinfer_version.startswith("0.6.1") and len(ev.flashinfer_version) == 5:
        out.append(
            Recommendation(
                Topic.RISK_FLASHINFER_0_6_1,
                "A fusion performance regression on SM100 is noted for FlashInfer 0.6.1 in SGLang's source.",
                ["reported: seed 000"],
                "low",
                provenance=["reported"],
            )
        )
    limit_c = SGLANG_FUSION_MAX_TOKENS // max(ev.draft_tokens, 1)
    out.append(
        Recommendation(
            Topic.RISK_FUSION_BATCH_LIMIT,
            f"Fusion applies only up to {SGLANG_FUSION_MAX_TOKENS} tokens per forward: with "
            f"{ev.draft_tokens} draft tokens per request, verify passes above {limit_c} concurrent requests fall back "
            "to NCCL.",
            ["gates audit (FUSE_ALLREDUCE_MAX_BATCH_SIZE)", "chapter 1"],
            "high",
            provenance=["audited"],
        )
    )
    if ev.interconnect != "NVLink":
        out.append(_no_multicast_risk(ev))
    return out


def _no_multicast_risk(ev: DeploymentFacts) -> Recommendation:
    """Without NVLink multicast (PCIe) fusion runs only where FlashInfer allocates its workspace without it;
    SGLang's preflight (>= 0.5.12) must then be opened as a precondition gate."""
    common: dict[str, Any] = dict(
        evidence=[
            "gates audit (precondition)",
            f"simulated-PCIe runs on 2 x H200 (SM90): {', '.join(ev.pcie_sim_runs) or 'none stored'}",
            "chapter 1",
        ],
        provenance=["audited", "measured"],
    )
    if flashinfer_workspace_needs_multicast(ev.flashinfer_version):
        return Recommendation(
            Topic.RISK_NO_MULTICAST,
            f"FlashInfer {ev.flashinfer_version}'s all-reduce workspace needs NVLink multicast, which a PCIe box "
            "lacks: fusion cannot run on it, whatever the gates say (chapter 1's forensics, read from the wheels).",
            confidence="medium",
            measure_next="upgrade SGLang with its pinned FlashInfer; grep the log for 'AllReduce Fusion enabled'",
            **common,
        )
    return Recommendation(
        Topic.RISK_NO_MULTICAST,
        "On PCIe SGLang's workspace preflight (>= 0.5.12) asks for NVLink multicast, logs 'Skipping allreduce "
        "fusion' and stays unfused; `verifylab gates apply` opens it as a precondition where the installed "
        "FlashInfer allocates its workspace without multicast. Check the log says 'AllReduce Fusion enabled' and "
        "a profile shows fused kernels.",
        confidence="medium",
        measure_next="grep the server log; profile for fused kernel names",
        **common,
    )


def _band(price) -> str:
    return f"{price.low_us:.0f}-{price.high_us:.0f} µs" if price is not None else "an unknown amount"


def _elimination(ev: DeploymentFacts) -> Recommendation:
    """Eliminate all-reduces, and how: the fastest option per regime and load (modelled)."""
    if not ev.answers:
        return Recommendation(Topic.ELIMINATION, "No model of the options.", [], "none")

    parts = []
    for regime, answer in ev.answers.items():
        loads = ", ".join(f"{c}: {answer.fastest_at(c)}" for c in answer.best_by_load)
        parts.append(f"{REGIME_TITLE[regime]}: {loads}")
    return Recommendation(
        Topic.ELIMINATION,
        "Fastest verify pass by regime and streams (modelled, within physical floors): "
        + "; ".join(parts)
        + ". Eliminating all-reduces (DP attention + EP all-to-all) pays only with many streams, where every GPU "
        "reads its own requests' attention; at one stream it reads all attention weights on one GPU. TP 4 x PP 2 "
        "keeps all 122 all-reduces (fewer ranks each) and SGLang refuses pipeline parallelism with speculative "
        "decoding; EP 8 with TP attention keeps the 122 all-reduces and reads whole experts on the busiest GPU.",
        ["chapter 4 (options per regime, modelled)"],
        "low",
        measure_next="`verifylab comm probe` on the box to know its regime; DeepEP all-to-all on PCIe is unmeasured",
        provenance=["modelled"],
    )


def recommend(ev: DeploymentFacts) -> list[Recommendation]:
    """All recommendations for the evidence at hand, the decision's three first."""
    spec = _speculation(ev)
    return [_fusion(ev), _elimination(ev), spec, _gates(ev), launch_command(ev, spec), *_risks(ev)]


def recommendations_frame(recs: list[Recommendation]) -> pd.DataFrame:
    rows = [
        asdict(r)
        | {"topic": r.topic.value, "evidence": "; ".join(r.evidence) or "none", "provenance": ", ".join(r.provenance)}
        for r in recs
    ]
    return pd.DataFrame(
        rows, columns=["topic", "recommendation", "confidence", "evidence", "command", "measure_next", "provenance"]
    )


DECISION_TOPICS = (Topic.FUSION, Topic.ELIMINATION, Topic.SPECULATION)


def decision_lines(recs: list[Recommendation], topics: tuple[Topic, ...] = DECISION_TOPICS) -> Prose:
    """The decision as Markdown bullets: each topic's recommendation with its confidence."""
    by_topic = {r.topic: r for r in recs}
    lines = [
        f"- **{t.value.capitalize()}** ({by_topic[t].confidence} confidence): {by_topic[t].recommendation}"
        for t in topics
        if t in by_topic
    ]
    return Prose("\n".join(lines))
