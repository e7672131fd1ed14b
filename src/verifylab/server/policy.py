"""A probe's policy applied to a launch: the settings it implies are set, a variant it rules out is refused with
the probe's reason (``verifylab serve --policy RUN``)."""

from __future__ import annotations

from verifylab.comm.policy import NO_CUSTOM_ALLREDUCE, Policy
from verifylab.errors import VerifylabError
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
    if tp > 1 and not policy.tensor_parallel:
        raise PolicyRefusal(f"--tp-size {tp}: probe {policy.run_id} rules out tensor parallelism ({why})")
    if tp > policy.world:
        raise PolicyRefusal(f"--tp-size {tp}: probe {policy.run_id} measured {policy.world} GPU(s); probe all {tp}")
    if variant.fusion and not policy.fusion_allowed:
        raise PolicyRefusal(f"variant {variant.name}: probe {policy.run_id} rules out all-reduce fusion ({why})")
    extra = list(base.extra_args)
    if tp > 1 and not policy.custom_allreduce and NO_CUSTOM_ALLREDUCE not in extra:
        extra.append(NO_CUSTOM_ALLREDUCE)
    unset = sorted({*base.unset_env, *policy.unset})
    return base.model_copy(update={"tp_size": tp, "extra_args": extra, "unset_env": unset})
