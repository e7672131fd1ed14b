"""What the recommendation rules see: ``DeploymentFacts`` for one box, collected from the evidence — measured
sweeps and variant states (mechanics-only runs left out), the reported figures, the cycle account and the
fusion-vs-elimination options, and the audited gate matrix for the installed SGLang."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from verifylab.analysis.benchmarks import active_only, crossovers, stored_benchmarks
from verifylab.analysis.gates import pcie_sm120_outlook, upgrade_target
from verifylab.analysis.live_smoke import mechanics_runs
from verifylab.errors import VerifylabError
from verifylab.launch import LaunchError, LaunchTarget
from verifylab.model.answers.decision import regime_answer, thresholds
from verifylab.model.views import CycleAccount, cycle_account, inputs, stored_inputs
from verifylab.reported import reported_value
from verifylab.server.variants import BaseConfig
from verifylab.store.evidence import Evidence


@dataclass
class DeploymentFacts:
    """What the rules see. Every field may be missing; the rules then say so."""

    crossover: dict | None = None  # {"status", "estimate", "bracket", "run_id"} from a measured sweep
    reported_liability_concurrency: float | None = None  # the case study's "C >= 30" (reported)
    fusion_state: dict | None = None  # {"active": bool, "reasons": str, "run_id"} of a measured fusion variant
    reported_fusion: dict | None = None  # {"eagle3", "eagle3_fusion", "baseline", "fusion_runs": (low, high)}
    account: CycleAccount | None = None  # the case study's cycle, every derived quantity as a range
    answers: dict | None = None  # Regime -> model.decision.RegimeAnswer (the four questions, modelled)
    thresholds: dict = field(default_factory=dict)  # regime value -> Price of an 8-rank all-reduce at 57 KB
    upgrade: tuple[str, str] | None = None  # (sglang, flashinfer): the one upgrade the book names (audited)
    upgrade_gates_closed: list[str] | None = None  # the gates to open on the upgrade target
    upgrade_fusion_blockers: str = ""  # of those, what keeps fusion off on a PCIe SM120 box (chapter 1's outlook)
    gates_closed: list[str] | None = None  # "file : function" closed for the target arch, installed version
    sglang_version: str | None = None
    flashinfer_version: str | None = None
    interconnect: str | None = None
    draft_tokens: int = 4
    help_text: str | None = None  # the installed SGLang's --help (live mode)
    base: BaseConfig | None = None
    launcher: list[str] | None = None  # what the printed command starts SGLang with (None: python -m ...)
    launch_target: LaunchTarget | None = None  # the SGLang the command is built for (None: its flags not audited)
    sm120_build_run: str | None = None  # the run that compiled FlashInfer's fusion module for sm_120a (measured)
    pcie_sim_runs: list[str] = field(default_factory=list)  # the simulated-PCIe runs on 2 x H200 (measured)


CASE_STUDY_BOX: dict[str, Any] = {"sglang_version": "0.5.9", "flashinfer_version": "0.6.4", "interconnect": "PCIe"}


def case_study_facts(ev: Evidence) -> DeploymentFacts:
    """The evidence for the case-study box (SGLang 0.5.9, FlashInfer 0.6.4, PCIe), as editions and exports cite it."""
    return facts_from_evidence(ev, **CASE_STUDY_BOX)


def facts_from_evidence(
    ev: Evidence,
    sglang_version: str | None = None,
    flashinfer_version: str | None = None,
    interconnect: str | None = None,
    base: BaseConfig | None = None,
    help_text: str | None = None,
    launcher: list[str] | None = None,
) -> DeploymentFacts:
    """Collect the evidence the rules use from ``data/``: measured sweeps and variant states (mechanics-only
    runs left out), the reported figures, and the audited gate matrix for ``sglang_version``."""
    figures = ev.figures
    fusion_runs = figures[figures.figure_id.str.startswith("fusion_run_")]["value"]
    stored = stored_benchmarks(ev)
    facts = DeploymentFacts(
        sglang_version=sglang_version,
        flashinfer_version=flashinfer_version,
        interconnect=interconnect,
        base=base,
        help_text=help_text,
        launcher=launcher,
        draft_tokens=base.speculative_num_draft_tokens if base else 4,
        reported_liability_concurrency=reported_value(figures, "spec_liability_concurrency"),
        reported_fusion={
            "eagle3": reported_value(figures, "eagle3_54_1"),
            "eagle3_fusion": reported_value(figures, "eagle3_fusion_96_1"),
            "baseline": reported_value(figures, "baseline_92_6"),
            "fusion_runs": (fusion_runs.min(), fusion_runs.max()),
        },
        account=cycle_account(stored_inputs(ev)),
    )
    _decision_facts(ev, facts)
    facts.launch_target = _launch_target(ev, facts)
    smoke = set(mechanics_runs(ev))  # mechanics only: never evidence for a deployment
    stored = {
        name: frame[~frame.run_id.isin(smoke)] if "run_id" in frame.columns else frame for name, frame in stored.items()
    }
    cross = crossovers(active_only(stored["requests"], stored["states"]))
    eagle = cross[cross.speculative == "eagle3"] if not cross.empty else cross
    if not eagle.empty:
        facts.crossover = eagle.iloc[-1].to_dict()
    states = stored["states"]
    if not states.empty:
        fused = states[states.variant.isin(["fusion", "eagle3_fusion"])]
        if not fused.empty:
            row = fused.iloc[-1]
            facts.fusion_state = {
                "active": bool(row.active),
                "reasons": row.get("inactive_reasons") or row.get("failure"),
                "run_id": row.run_id,
            }
    if sglang_version and ev.has_gate_matrix:
        facts.gates_closed = _closed_gates(ev.gate_matrix, sglang_version)
    facts.sm120_build_run = ev.newest_with("sm120_build")
    facts.pcie_sim_runs = ev.runs.of_campaign("pcie-sim-before", "pcie-sim-after")
    return facts


def _launch_target(ev: Evidence, facts: DeploymentFacts) -> LaunchTarget | None:
    """The SGLang the recommended command is built for: the installed one live (its --help), else the upgrade the
    book names or the box's version, as its wheel was audited (None where its flags are not in the table)."""
    if facts.help_text is not None:
        return LaunchTarget.installed(facts.help_text, facts.sglang_version, facts.flashinfer_version)
    version = facts.upgrade[0] if facts.upgrade else facts.sglang_version
    try:
        return None if version is None else ev.launch_target(version)
    except LaunchError:
        return None


def _closed_gates(matrix: pd.DataFrame, version: str) -> list[str] | None:
    rows = matrix[(matrix.package == "sglang") & (matrix.version.astype(str) == version)]
    if rows.empty:
        return None
    closed = rows[rows.status == "closed"]
    return [f"{f.replace('sglang/srt/', '')} : {fn}" for f, fn in zip(closed.file, closed.function, strict=False)]


def _decision_facts(ev: Evidence, facts: DeploymentFacts) -> None:
    """The modelled answers per regime, the all-reduce bands, and the one upgrade target (audited wheels)."""

    try:
        facts.answers = {regime: regime_answer(ev, regime) for regime in inputs(stored_inputs(ev)).curves.regimes()}
        facts.thresholds = thresholds(ev)
    except VerifylabError:  # a data folder without the measured inputs: the rules say what is missing
        facts.answers, facts.thresholds = None, {}
    if ev.has_gate_matrix:
        outlook = pcie_sm120_outlook(ev.fusion_forensics)
        facts.upgrade = upgrade_target(outlook)
        if facts.upgrade:
            facts.upgrade_gates_closed = _closed_gates(ev.gate_matrix, facts.upgrade[0])
            facts.upgrade_fusion_blockers = str(outlook.loc[facts.upgrade[0], "to open"])
