"""Chapter 05, the recommendations: rules over the evidence (what to deploy, when to turn speculation off,
which gates to open, the risks), the PCIe SM120 outlook, and the launch command."""

from __future__ import annotations

from verifylab.analysis.facts import facts_from_evidence
from verifylab.analysis.launch_command import wrapped_command
from verifylab.analysis.recommend import DECISION_TOPICS, decision_lines, recommend, recommendations_frame
from verifylab.analysis.recommendation import Recommendation, Topic
from verifylab.chapters.ch01_environment_and_gates import pcie_sm120_finding
from verifylab.chapters.params import Recommendations as Params
from verifylab.report.section import Prose
from verifylab.report.tables import Table
from verifylab.server.launch import BaseConfig, launcher_help
from verifylab.store.evidence import Evidence

__all__ = ["Params", "pcie_sm120_finding"]


def _recommendations(ev: Evidence, params: Params) -> list[Recommendation]:
    def compute(e: Evidence) -> list[Recommendation]:
        base = None  # without a model there is no command to build
        if params.model_path:
            base = BaseConfig(
                model_path=params.model_path,
                tp_size=params.tp_size,
                draft_model_path=params.draft_model_path,
                launcher=params.launcher,
            )
        help_text = launcher_help(params.launcher) if params.mode == "live" else None
        facts = facts_from_evidence(
            e, params.sglang_version, params.flashinfer_version, params.interconnect, base, help_text
        )
        return recommend(facts)

    return ev.derived(f"recommendations/{params.model_dump_json()}", compute)


def recommendations(ev: Evidence, params: Params) -> Table:
    """Table: every recommendation (its text across the table, under its topic, confidence, evidence and what to
    measure next); the commands as listings below it."""
    return Table(recommendations_frame(_recommendations(ev, params)), listed=("command",), spanned="recommendation")


def finding(ev: Evidence, params: Params) -> Prose:
    """Finding: the decision for this box in a few lines, each with its confidence (chapter 4 carries the ranges)."""
    return decision_lines(_recommendations(ev, params), DECISION_TOPICS)


def print_launch_command(ev: Evidence, params: Params) -> None:
    """Print the launch command of the recommended variant, one flag per line (checked against --help live)."""
    command = next(r.command for r in _recommendations(ev, params) if r.topic is Topic.LAUNCH_COMMAND)
    print(wrapped_command(command) if command else "No launch command: no model path was given.")
