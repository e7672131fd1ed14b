"""What each stored probe allows on its box (its ``policy.json``, derived again from the run's tables by the same
rules), and whether a launch command keeps to it: chapter 05's policy table and its check of the command."""

from __future__ import annotations

import shlex

import pandas as pd

from verifylab.comm.policy import Break, Policy, policy_breaks, policy_from_probe
from verifylab.launch import FUSION_BACKEND_FLAG, FUSION_FLAG, NO_CUSTOM_ALLREDUCE
from verifylab.sources import MeasuredRuns


def probe_policy(runs: MeasuredRuns, run_id: str) -> Policy:
    """The policy of one stored probe: the rules ``verifylab comm probe`` wrote beside it, from its tables."""
    run = runs.run(run_id)
    environment = dict(run.parameters.get("nccl_environment") or {})
    return policy_from_probe(
        run_id, runs.read_table(run_id, "verdict"), runs.read_table(run_id, "allreduce_latency"), environment
    )


def stored_policies(runs: MeasuredRuns) -> list[Policy]:
    """Every stored probe's policy (mechanics-only runs, made against a test double, left out), oldest first."""
    return [
        probe_policy(runs, run_id)
        for run_id in runs.runs_with_all(("verdict", "allreduce_latency"))
        if not runs.run(run_id).mechanics_only
    ]


def policies_frame(policies: list[Policy]) -> pd.DataFrame:
    """One row per probe: GPUs, regime, what may run, the flags and variables it implies, and why."""

    def yes(allowed: bool) -> str:
        return "allowed" if allowed else "off"

    return pd.DataFrame(
        [
            {
                "GPUs": p.world,
                "regime": p.regime,
                "tensor parallel": yes(p.tensor_parallel),
                "fusion": yes(p.fusion_allowed),
                "custom all-reduce": yes(p.custom_allreduce),
                "unset": ", ".join(p.unset) or "—",
                # the run id and the flags whole (a cell would shorten them), with the reasons, across the table
                "probe, flags and why": f"{p.run_id}: flags {' '.join(p.sglang_flags)}; "
                + ("; ".join(p.reasons) or "healthy: nothing ruled out"),
            }
            for p in policies
        ]
    )


def command_breaks_policy(command: str, policy: Policy) -> list[str]:
    """What in a launch command the probe's policy rules out (empty: it keeps to the policy)."""
    args = shlex.split(command)
    tp = int(args[args.index("--tp-size") + 1]) if "--tp-size" in args[:-1] else 1
    words = {
        Break.TENSOR_PARALLEL: f"--tp-size {tp}: tensor parallelism is ruled out",
        Break.MORE_GPUS: f"--tp-size {tp}: the probe measured {policy.world} GPU(s)",
        Break.FUSION: "all-reduce fusion is on: fusion is ruled out",
        Break.CUSTOM_ALLREDUCE: f"custom all-reduce is left on: add {NO_CUSTOM_ALLREDUCE}",
    }
    fused = FUSION_FLAG in args or FUSION_BACKEND_FLAG in args
    return [words[rule] for rule in policy_breaks(policy, tp, fused, NO_CUSTOM_ALLREDUCE in args)]
