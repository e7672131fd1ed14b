"""The serving policy a probe implies, written beside the run as ``policy.json``: whether tensor parallelism is safe
on these GPUs, whether FlashInfer's all-reduce fusion and SGLang's custom all-reduce can run, the NCCL variables to
set or unset, and the SGLang flags that follow. ``verifylab serve --policy RUN`` applies it and refuses a variant
it rules out; chapter 05 shows it. What is *allowed* here, not what pays: the decision page prices that."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

import pandas as pd

from verifylab.comm.verdict import whole_set
from verifylab.errors import ManifestError
from verifylab.intake import OutsideFileError, read_outside_bytes
from verifylab.iorw import atomic_write_json
from verifylab.launch import setting_args
from verifylab.vocab import P2P_WORKS, Regime

POLICY_FILE = "policy.json"


@dataclass(frozen=True)
class Policy:
    """What a probe's verdict allows on its box, with the reason for each rule."""

    run_id: str
    world: int
    regime: str
    tensor_parallel: bool  # False: a path returned wrong sums, or one GPU
    fusion_allowed: bool
    custom_allreduce: bool
    sglang_flags: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)  # to set
    unset: list[str] = field(default_factory=list)  # to remove from the environment
    refused_paths: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def _correct(latency: pd.DataFrame, impl: str) -> bool:
    rows = latency[(latency["impl"] == impl) & (latency["group"] == "all")]
    return not rows.empty and "correct" in rows and bool((rows["correct"].astype(str).str.lower() == "true").any())


def policy_from_probe(run_id: str, verdict: pd.DataFrame, latency: pd.DataFrame, environment: dict[str, str]) -> Policy:
    """The policy of a probe's whole-set verdict and its latency table (which paths ran, which were right)."""
    whole = whole_set(verdict)
    if whole.empty:
        raise ManifestError(f"run '{run_id}': no verdict for the whole set of GPUs: no policy")
    v = whole.iloc[0]
    regime, world = Regime(str(v["regime"])), int(v["world"])
    refused = [p.strip() for p in str(v.get("refused_paths", "") or "").split(",") if p.strip() and p != "nan"]
    reasons: list[str] = []
    unset = [name for name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE") if environment.get(name, "0") not in ("", "0")]
    if unset:
        reasons.append(f"the probe ran with {', '.join(unset)} set: unset it for serving")
    tensor_parallel = world > 1 and not ({"nccl", "gloo", "peer copies"} & set(refused))
    if world == 1:
        reasons.append("one GPU: serve at TP 1, no all-reduce")
    elif not tensor_parallel:
        reasons.append(f"{', '.join(refused)} returned wrong data: no tensor parallelism until that is fixed")
    p2p = regime in P2P_WORKS
    fused_ok = _correct(latency, "fused")
    fusion = tensor_parallel and p2p and fused_ok and "fused" not in refused
    if tensor_parallel and not fusion:
        why = (
            "the fused kernel returned wrong sums"
            if "fused" in refused
            else "FlashInfer's fused kernel was not checked correct in this probe (probe again with --extra)"
            if p2p
            else f"{regime.value}: FlashInfer's kernels write into the peers' memory and need healthy P2P"
        )
        reasons.append(f"fusion off: {why}")
    custom = tensor_parallel and p2p
    if tensor_parallel and not custom:
        reasons.append(f"custom all-reduce off: it needs P2P ({regime.value})")
    flags = setting_args(
        tp_size=world if tensor_parallel else 1, disable_custom_all_reduce=tensor_parallel and not custom
    )
    if regime is Regime.UNKNOWN:
        reasons.append("the regime is unknown: probe again before trusting any of this")
    return Policy(run_id, world, regime.value, tensor_parallel, fusion, custom, flags, {}, unset, refused, reasons)


class Break(StrEnum):
    """What a launch can do that a policy rules out."""

    TENSOR_PARALLEL = "tensor parallelism where the probe rules it out"
    MORE_GPUS = "more GPUs than the probe measured"
    FUSION = "all-reduce fusion where the probe rules it out"
    CUSTOM_ALLREDUCE = "custom all-reduce left on without healthy P2P"


def policy_breaks(policy: Policy, tp: int, fusion: bool, custom_allreduce_off: bool) -> list[Break]:
    """The rules of ``policy`` a launch at ``tp`` ranks (with fusion, with custom all-reduce turned off) breaks:
    the one statement of them that `verifylab serve --policy` and chapter 05's check of a command both apply."""
    broken = []
    if tp > 1 and not policy.tensor_parallel:
        broken.append(Break.TENSOR_PARALLEL)
    elif tp > policy.world:
        broken.append(Break.MORE_GPUS)
    if fusion and not policy.fusion_allowed:
        broken.append(Break.FUSION)
    if tp > 1 and not policy.custom_allreduce and not custom_allreduce_off:
        broken.append(Break.CUSTOM_ALLREDUCE)
    return broken


def write_policy(run_dir: Path, policy: Policy) -> None:
    atomic_write_json(run_dir / POLICY_FILE, policy.to_json())


def read_policy(run_dir: Path) -> Policy:
    """The policy stored beside a probe run; one line naming what is wrong otherwise."""
    path = run_dir / POLICY_FILE
    if not path.exists() and not path.is_symlink():
        raise ManifestError(f"{path}: no policy (a run of `verifylab comm probe` writes one)")
    try:
        data = json.loads(read_outside_bytes(path, "policy", root=run_dir))
        return Policy(**data)
    except OutsideFileError as exc:
        raise ManifestError(str(exc)) from None
    except (ValueError, TypeError) as exc:
        raise ManifestError(f"{path}: not a verifylab policy ({exc})") from None


def trusted_policy(run_dir: Path, derived: Policy) -> Policy:
    """The policy stored beside a probe run, trusted only as what the run's own tables imply (``derived``: its
    verdict and latency table, :func:`policy_from_probe`): a file of the wrong types, another run's policy or one
    edited since (fusion on a host-memory box, a larger TP than the probe measured) is refused, naming the
    difference. ``verifylab serve --policy`` reads policies through this."""
    stored = read_policy(run_dir)
    for name, value in asdict(stored).items():
        want = type(getattr(derived, name))
        if not isinstance(value, want) or (isinstance(value, list) and not all(isinstance(x, str) for x in value)):
            raise ManifestError(f"{run_dir / POLICY_FILE}: '{name}' is {value!r}, not a {want.__name__}")
    if stored.run_id != run_dir.name:
        raise ManifestError(f"{run_dir / POLICY_FILE}: the policy of run {stored.run_id!r}, not of {run_dir.name!r}")
    differ = [name for name in asdict(stored) if getattr(stored, name) != getattr(derived, name)]
    if differ:
        raise ManifestError(
            f"{run_dir / POLICY_FILE}: {', '.join(differ)} differ from what the probe's own tables imply (edited or "
            "stale): run `verifylab comm probe` again, or delete the file to use the tables"
        )
    return stored
