"""Chapter 05, the recommendations: rules over the evidence (what to deploy, when to turn speculation off,
which gates to open, the risks), the PCIe SM120 outlook, and the launch command."""

from __future__ import annotations

import pandas as pd

from verifylab.analysis import box_verify
from verifylab.analysis.facts import facts_from_evidence
from verifylab.analysis.launch_command import stack_commands, wrapped_command
from verifylab.analysis.probe_policies import command_breaks_policy, policies_frame, probe_policy, stored_policies
from verifylab.analysis.recommend import DECISION_TOPICS, decision_lines, recommend, recommendations_frame
from verifylab.analysis.recommendation import Recommendation, Topic
from verifylab.chapters._base import shown_as_table
from verifylab.chapters.ch01_environment_and_gates import pcie_sm120_finding
from verifylab.chapters.params import Recommendations as Params
from verifylab.derived import derived
from verifylab.launch import AllReduce
from verifylab.report.section import Prose
from verifylab.report.tables import Table
from verifylab.server.launch import launcher_help
from verifylab.server.settings import running_interpreter_launcher
from verifylab.server.variants import BaseConfig
from verifylab.store.evidence import Evidence
from verifylab.vocab import CASE_STUDY_STACK

__all__ = ["Params", "pcie_sm120_finding"]


def _recommendations(ev: Evidence, params: Params) -> list[Recommendation]:
    return _recommendations_for(ev, params.model_dump_json())


@derived
def _recommendations_for(ev: Evidence, params_json: str) -> list[Recommendation]:
    """The rules' answers for one set of the chapter's parameters (keyed by them as JSON: a model is no key)."""
    params = Params.model_validate_json(params_json)
    base = None  # without a model there is no command to build
    if params.model_path:
        base = BaseConfig(
            model_path=params.model_path,
            tp_size=params.tp_size,
            draft_model_path=params.draft_model_path,
            launcher=params.launcher,
        )
    live = params.mode == "live"
    launcher = params.launcher or (running_interpreter_launcher() if live else None)  # printed as the box starts it
    help_text = launcher_help(launcher) if live and launcher else None
    facts = facts_from_evidence(
        ev, params.sglang_version, params.flashinfer_version, params.interconnect, base, help_text, launcher
    )
    return recommend(facts)


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


def case_study_command(ev: Evidence) -> None:
    """Print the command of the case study's own stack (SGLang and FlashInfer as it ran them), for a box that cannot
    upgrade: EAGLE-3 with 4 draft tokens at TP 8 on NCCL, checked against that wheel's flags and variables."""
    (command,) = stack_commands(
        [("The case study's own stack", "", ev.launch_target(CASE_STUDY_STACK[0]), AllReduce.NCCL)]
    )
    print(
        f"SGLang {CASE_STUDY_STACK[0]} with FlashInfer {CASE_STUDY_STACK[1]}, the pair the case study launched "
        f"(checked against {command.checked_against}):"
    )
    print(wrapped_command(command.command))


def probe_policies(ev: Evidence) -> Table:
    """Table: what each stored probe allows on its box (the ``policy.json`` beside it): tensor parallelism, fusion,
    custom all-reduce, the SGLang flags and the variables to unset, and why."""
    return Table(policies_frame(stored_policies(ev.measured)), spanned="probe, flags and why")


def policy_check(ev: Evidence, params: Params) -> Prose:
    """Finding: whether the launch command keeps to the policy of the box's probe (``probe_run``), or why not."""
    if params.probe_run is None:
        return Prose(
            "No probe of this box was given (parameter `probe_run`): the command below is not checked against "
            "one. `verifylab serve --policy RUN` applies a probe's policy at launch."
        )
    policy = probe_policy(ev.measured, params.probe_run)
    command = next(r.command for r in _recommendations(ev, params) if r.topic is Topic.LAUNCH_COMMAND)
    if not command:
        return Prose(f"Probe `{policy.run_id}` ({policy.regime}): no launch command to check (no model path).")
    broken = command_breaks_policy(command, policy)
    if not broken:
        return Prose(f"The command below keeps to the policy of probe `{policy.run_id}` ({policy.regime}).")
    return Prose(
        f"**The command below breaks the policy of probe `{policy.run_id}`** ({policy.regime}): "
        + "; ".join(broken)
        + f". `verifylab serve --policy {policy.run_id}` would refuse or correct it."
    )


@derived
def _checks(ev: Evidence) -> pd.DataFrame:
    return box_verify.checked(ev.measured)


@shown_as_table
def recommendation_checked(ev: Evidence) -> pd.DataFrame:
    """Table: every stored `verifylab box --verify`: the choice, the runner-up and plain decoding at the planned
    stream counts, the plan's prediction (before the run) and the refit's beside the measurement."""
    return box_verify.checked_view(_checks(ev))


def checked_finding(ev: Evidence) -> Prose:
    """Finding: what the newest box check measured against the model's choice (formatted from the stored run)."""
    table = _checks(ev)
    if table.empty:
        return Prose("No `verifylab box --verify` run is stored: the recommendation has not been checked on a box.")
    run = str(table["run"].iloc[-1])
    v = box_verify.verdict(ev.measured, run, table[table["run"] == run])
    mine = table[table["run"] == run]
    plan_miss = mine["error"].abs().median()
    refit_inside = int((mine["refit_error"] == 0).sum())
    judged = (
        "the model chose right"
        if v.model_right
        else f"the model chose wrongly: {v.winner} served the most, measured, and the measured answer wins"
    )
    return Prose(
        f"Checked on the box (run {run}, at the owner's load of {v.load} streams): {judged}. The choice "
        f"({v.chosen}) served {v.chosen_goodput:.0f} tok/s within the SLO against the runner-up's "
        f"{v.runner_up_goodput:.0f} ({v.runner_up}). The plan's own numbers were off: its tok/s missed the "
        f"measurement by a median {plan_miss:.0%} over {v.measured_cells} cells, because it priced the verify "
        "pass as if each token of a chain drew its own experts; the model refitted on the spread-forced grid (chapter "
        f"2) holds {refit_inside} of the {len(mine)} measured cells within its range, out of sample."
    )
