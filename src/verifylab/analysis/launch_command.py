"""The recommended launch command: the variant to deploy, on the all-reduce the version pair offers, built by the one
builder (:mod:`verifylab.launch`) for the targeted SGLang (its audited flags in replay, its ``--help`` live), and the
command as a listing (one flag per line)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verifylab.analysis.facts import DeploymentFacts
from verifylab.analysis.recommendation import Recommendation, Topic
from verifylab.launch import AllReduce, LaunchError, LaunchTarget, SglangLaunch, build_command
from verifylab.model.answers.decision import fusion_switch
from verifylab.report.tables import listing_text
from verifylab.server.variants import DEFAULT_VARIANTS, variant_launch
from verifylab.vocab import PCIE_IPC_FLASHINFER, PCIE_IPC_SGLANG, Regime

DRAFT_PLACEHOLDER = "<EAGLE-3-draft-path>"
REPLAY_LAUNCHER = ("python", "-m", "sglang.launch_server")  # the box's own interpreter, as a reader types it


def deployed_variant(ev: DeploymentFacts, rec: Recommendation) -> str:
    """The variant the answers deploy: EAGLE-3 unless the speculation answer turns it off, fusion only where the
    decision says turn it on with healthy P2P (off, unresolved or not priced: fusion stays off)."""
    healthy = (ev.answers or {}).get(Regime.HEALTHY_P2P)
    fusion_on = healthy is not None and fusion_switch(healthy.fusion_gain_ms) == "on"
    speculate = rec.keep_speculation is not False
    return {(True, True): "eagle3_fusion", (True, False): "eagle3", (False, True): "fusion"}.get(
        (speculate, fusion_on), "baseline"
    )


def launch_command(ev: DeploymentFacts, rec: Recommendation) -> Recommendation:
    """The launch command of the variant ``rec`` (speculation vs load) leaves on, built for the target SGLang (the
    upgrade the book names, else the box's), a placeholder for a draft model not given, the chapter's launcher."""
    if ev.base is None:
        return Recommendation(Topic.LAUNCH_COMMAND, "No model path given: no command built.", [], "none")
    target = ev.upgrade[0] if ev.upgrade else ev.sglang_version
    variant = DEFAULT_VARIANTS[deployed_variant(ev, rec)]
    base, placeholder = ev.base, ""
    if variant.speculative and not base.draft_model_path:
        base = base.model_copy(update={"draft_model_path": DRAFT_PLACEHOLDER})
        placeholder = f" No draft model was given: {DRAFT_PLACEHOLDER} stands for your EAGLE-3 draft."
    if ev.launch_target is None:
        return Recommendation(
            Topic.LAUNCH_COMMAND,
            f"No flags of SGLang {target} are audited here (verifylab gates matrix): no command built.",
            [],
            "none",
        )
    ipc = not variant.fusion and ev.launch_target.has_pcie_ipc
    launch = variant_launch(base, variant)
    if ipc:
        launch = launch.model_copy(update={"allreduce": AllReduce.PCIE_IPC})
    try:
        command = build_command(launch, ev.launch_target)
    except LaunchError as exc:
        return Recommendation(Topic.LAUNCH_COMMAND, f"No command: {exc}.", [], "none")
    on = f" on SGLang {target}" if target and target != ev.sglang_version else ""
    ipc_words = (
        " with SGLang's PCIe-IPC all-reduce on"
        if ipc
        else ""
        if variant.fusion
        else f" (the PCIe-IPC all-reduce needs SGLang {PCIE_IPC_SGLANG}+ with FlashInfer {PCIE_IPC_FLASHINFER}+: "
        "not on this version)"
    )
    fusion = "" if variant.fusion else ", fusion off (the decision does not turn it on)"
    live = ev.help_text is not None
    return Recommendation(
        Topic.LAUNCH_COMMAND,
        f"Deploy variant '{variant.name}'{on}{fusion}{ipc_words} (its flags checked against "
        f"{command.checked_against}). Speculative parameters (steps {ev.base.speculative_num_steps}, top-k "
        f"{ev.base.speculative_eagle_topk}, draft tokens {ev.base.speculative_num_draft_tokens}) are the common "
        f"defaults, not tuned here.{placeholder}",
        ["chapter 2"],
        "medium" if live else "low",
        command=command.shell(ev.launcher or REPLAY_LAUNCHER),
        measure_next="" if live else "sweep --speculative-num-draft-tokens 2-8 on the box",
    )


def wrapped_command(command: str) -> str:
    """A shell command one flag per line, continued with backslashes (pages and terminals stay narrow)."""
    return listing_text(command)


@dataclass(frozen=True)
class StackCommand:
    """A launch command for one named stack: what it is for, the versions, and the shell command as built."""

    title: str
    versions: str
    command: str
    checked_against: str
    reasons: tuple[tuple[str, str], ...] = ()  # each flag that needs one and why it stands there


def stack_commands(
    targets: Sequence[tuple[str, str, LaunchTarget, AllReduce]], tp: int = 8, **answer: Any
) -> list[StackCommand]:
    """EAGLE-3 with 4 draft tokens at TP ``tp`` on each (title, versions, target, all-reduce), built by the one
    builder and checked against the target's audited flags and the variables its wheel reads (a stack the builder
    refuses is named with why); ``answer``: the settings the answer priced (attention backend, KV dtype, remote
    code)."""
    out = []
    for title, versions, target, allreduce in targets:
        launch = SglangLaunch.speculative(
            "EAGLE3", 4, DRAFT_PLACEHOLDER, model_path="<model-path>", tp_size=tp, allreduce=allreduce, **answer
        )
        try:
            built = build_command(launch, target)
            out.append(
                StackCommand(
                    title,
                    versions,
                    built.shell(REPLAY_LAUNCHER),
                    f"the audited SGLang {target.version} wheel",
                    tuple(built.reasons()),
                )
            )
        except LaunchError as exc:
            out.append(StackCommand(title, versions, f"no command: {exc}", target.name))
    return out
