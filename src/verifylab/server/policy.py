"""A probe's policy applied to a launch: the settings it implies are set, a variant it rules out is refused with
the probe's reason (``verifylab serve --policy RUN``)."""

from __future__ import annotations

from verifylab.comm.policy import Break, Policy, policy_breaks
from verifylab.errors import VerifylabError
from verifylab.launch import NO_CUSTOM_ALLREDUCE
from verifylab.server.variants import BaseConfig, Variant


class PolicyRefusal(VerifylabError):
    """The launch asked for what the box's probe rules out."""


def policy_tp_size(policy: Policy) -> int:
    """The tensor-parallel size the policy allows: the probed GPUs when TP is safe, else 1."""
    return policy.world if policy.tensor_parallel else 1


def apply_policy(policy: Policy, base: BaseConfig, variant: Variant, tp_size: int | None) -> BaseConfig:
    """``base`` as the policy of ``policy.run_id`` allows it: the TP size (``tp_size`` or the policy's), custom
    all-reduce off where the policy says so, the variables it unsets removed from the server's environment."""
    why = "; ".join(policy.reasons) or policy.regime
    allowed = policy_tp_size(policy)
    tp = allowed if tp_size is None else tp_size
    custom_off = base.disable_custom_all_reduce or NO_CUSTOM_ALLREDUCE in base.extra_args
    broken = policy_breaks(policy, tp, variant.fusion, custom_off)
    refusals = {  # what cannot be corrected is refused, in this order
        Break.TENSOR_PARALLEL: f"--tp-size {tp}: probe {policy.run_id} rules out tensor parallelism ({why})",
        Break.MORE_GPUS: f"--tp-size {tp}: probe {policy.run_id} measured {policy.world} GPU(s); probe all {tp}",
        Break.FUSION: f"variant {variant.name}: probe {policy.run_id} rules out all-reduce fusion ({why})",
    }
    for rule, refusal in refusals.items():
        if rule in broken:
            raise PolicyRefusal(refusal)
    unset = sorted({*base.unset_env, *policy.unset})
    custom_off = custom_off or Break.CUSTOM_ALLREDUCE in broken  # corrected, not refused
    return base.model_copy(update={"tp_size": tp, "disable_custom_all_reduce": custom_off, "unset_env": unset})
