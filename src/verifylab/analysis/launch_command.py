"""The recommended launch command: the variant to deploy, its flags as the targeted SGLang version spells them,
and the command as a listing (one flag per line)."""

from __future__ import annotations

from verifylab.analysis.facts import DeploymentFacts
from verifylab.analysis.recommendation import Recommendation, Topic
from verifylab.command_line import SGLANG, shell_command
from verifylab.report.tables import listing_text
from verifylab.server.variants import DEFAULT_VARIANTS, variant_args
from verifylab.vocab import version_at_least

DRAFT_PLACEHOLDER = "<EAGLE-3-draft-path>"
FUSION_BACKEND_FLAG_FROM = "0.5.17"  # SGLang adds --flashinfer-allreduce-fusion-backend (audited wheels)


def replay_flags(version: str | None) -> str:
    """The flags a replayed command may use, as the targeted SGLang version spells them (unchecked in replay)."""
    flags = (
        "--model-path --tp-size --host --port --enable-flashinfer-allreduce-fusion --speculative-algorithm "
        "--speculative-draft-model-path --speculative-num-steps --speculative-eagle-topk --speculative-num-draft-tokens"
    )
    if version_at_least(version, FUSION_BACKEND_FLAG_FROM):
        flags += " --flashinfer-allreduce-fusion-backend --enforce-disable-flashinfer-allreduce-fusion"
    return flags


def launch_command(ev: DeploymentFacts, rec: Recommendation) -> Recommendation:
    """The launch command of the variant ``rec`` (speculation vs load) leaves on: flags as the target SGLang
    version spells them (its --help in live mode), a placeholder for a draft model not given."""
    if ev.base is None:
        return Recommendation(Topic.LAUNCH_COMMAND, "No model path given: no command built.", [], "none")
    target = ev.upgrade[0] if ev.upgrade else ev.sglang_version
    help_text = ev.help_text or replay_flags(target)
    variant = DEFAULT_VARIANTS["fusion" if rec.keep_speculation is False else "eagle3_fusion"]
    base, placeholder = ev.base, ""
    if variant.speculative and not base.draft_model_path:
        base = base.model_copy(update={"draft_model_path": DRAFT_PLACEHOLDER})
        placeholder = f" No draft model was given: {DRAFT_PLACEHOLDER} stands for your EAGLE-3 draft."
    args = variant_args(base, variant, help_text)
    checked = (
        "checked against the installed --help"
        if ev.help_text
        else "flags not checked (replay): `verifylab serve` checks them against the installed --help"
    )
    on = f" on SGLang {target}" if target and target != ev.sglang_version else ""
    return Recommendation(
        Topic.LAUNCH_COMMAND,
        f"Deploy variant '{variant.name}'{on} ({checked}). Speculative parameters "
        f"(steps {ev.base.speculative_num_steps}, top-k {ev.base.speculative_eagle_topk}, draft "
        f"tokens {ev.base.speculative_num_draft_tokens}) are the common defaults, not tuned here.{placeholder}",
        ["chapter 2"],
        "medium" if ev.help_text else "low",
        command=shell_command([*SGLANG, *args]),
        measure_next="" if ev.help_text else "sweep --speculative-num-draft-tokens 2-8 on the box",
    )


def wrapped_command(command: str) -> str:
    """A shell command one flag per line, continued with backslashes (pages and terminals stay narrow)."""
    return listing_text(command)
