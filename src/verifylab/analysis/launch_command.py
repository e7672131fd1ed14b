"""The recommended launch command: the variant to deploy, its flags as the targeted SGLang version spells them,
and the command as a listing (one flag per line)."""

from __future__ import annotations

from verifylab.analysis.facts import DeploymentFacts
from verifylab.analysis.recommendation import Recommendation, Topic
from verifylab.command_line import SGLANG, shell_command
from verifylab.model.answers.decision import fusion_switch
from verifylab.model.case.options import PCIE_IPC_FLASHINFER, PCIE_IPC_SGLANG
from verifylab.report.tables import listing_text
from verifylab.server.variants import DEFAULT_VARIANTS, variant_args
from verifylab.vocab import Regime, version_at_least

DRAFT_PLACEHOLDER = "<EAGLE-3-draft-path>"
FUSION_BACKEND_FLAG_FROM = (
    "0.5.14"  # the first audited wheel with --flashinfer-allreduce-fusion-backend (sglang_flags.csv)
)


def replay_flags(version: str | None) -> str:
    """The flags a replayed command may use, as the targeted SGLang version spells them (unchecked in replay)."""
    flags = (
        "--model-path --tp-size --host --port --enable-flashinfer-allreduce-fusion --speculative-algorithm "
        "--speculative-draft-model-path --speculative-num-steps --speculative-eagle-topk --speculative-num-draft-tokens"
    )
    if version_at_least(version, FUSION_BACKEND_FLAG_FROM):
        flags += " --flashinfer-allreduce-fusion-backend --enforce-disable-flashinfer-allreduce-fusion"
    return flags


def deployed_variant(ev: DeploymentFacts, rec: Recommendation) -> str:
    """The variant the answers deploy: EAGLE-3 unless the speculation answer turns it off, fusion only where the
    decision says turn it on with healthy P2P (off, unresolved or not priced: fusion stays off)."""
    healthy = (ev.answers or {}).get(Regime.HEALTHY_P2P)
    fusion_on = healthy is not None and fusion_switch(healthy.fusion_gain_ms) == "on"
    speculate = rec.keep_speculation is not False
    return {(True, True): "eagle3_fusion", (True, False): "eagle3", (False, True): "fusion"}.get(
        (speculate, fusion_on), "baseline"
    )


def pcie_ipc_env(sglang: str | None, flashinfer: str | None) -> list[str]:
    """The environment that turns SGLang's PCIe-IPC all-reduce on, where the version pair has it (else none)."""
    if version_at_least(sglang, PCIE_IPC_SGLANG) and version_at_least(flashinfer, PCIE_IPC_FLASHINFER):
        return ["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1"]
    return []


def launch_command(ev: DeploymentFacts, rec: Recommendation) -> Recommendation:
    """The launch command of the variant ``rec`` (speculation vs load) leaves on: flags as the target SGLang
    version spells them (its --help in live mode), a placeholder for a draft model not given."""
    if ev.base is None:
        return Recommendation(Topic.LAUNCH_COMMAND, "No model path given: no command built.", [], "none")
    target = ev.upgrade[0] if ev.upgrade else ev.sglang_version
    help_text = ev.help_text or replay_flags(target)
    variant = DEFAULT_VARIANTS[deployed_variant(ev, rec)]
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
    env = pcie_ipc_env(target, ev.upgrade[1] if ev.upgrade else ev.flashinfer_version)
    ipc = (
        " with SGLang's PCIe-IPC all-reduce on"
        if env
        else f" (the PCIe-IPC all-reduce needs SGLang {PCIE_IPC_SGLANG}+ with FlashInfer {PCIE_IPC_FLASHINFER}+: "
        "not on this version)"
    )
    fusion = "" if variant.fusion else ", fusion off (the decision does not turn it on)"
    return Recommendation(
        Topic.LAUNCH_COMMAND,
        f"Deploy variant '{variant.name}'{on}{fusion}{ipc} ({checked}). Speculative parameters "
        f"(steps {ev.base.speculative_num_steps}, top-k {ev.base.speculative_eagle_topk}, draft "
        f"tokens {ev.base.speculative_num_draft_tokens}) are the common defaults, not tuned here.{placeholder}",
        ["chapter 2"],
        "medium" if ev.help_text else "low",
        command=shell_command([*env, *SGLANG, *args]),
        measure_next="" if ev.help_text else "sweep --speculative-num-draft-tokens 2-8 on the box",
    )


def wrapped_command(command: str) -> str:
    """A shell command one flag per line, continued with backslashes (pages and terminals stay narrow)."""
    return listing_text(command)
