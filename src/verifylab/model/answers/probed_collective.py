"""Which all-reduce a probed box runs: NCCL as its probe measured it (SGLang's default), and SGLang's PCIe-IPC
all-reduce where it is priced there, or why it is not. One rule for `box --probe`'s all-reduce answer and the choice
`box --plan --probe` makes between the two by goodput; and FlashInfer's fused all-reduce + RMSNorm where the
probe measured it and its policy allows it, the plan's third."""

from __future__ import annotations

from verifylab.comm.policy import Policy
from verifylab.launch import LaunchTarget
from verifylab.model.case.options import NormCurve
from verifylab.model.fits.in_pass import regime_curves
from verifylab.model.inputs.curves import Curve
from verifylab.model.inputs.stored import StoredInputs
from verifylab.model.pricing.boxes import AllreduceCurve, probed_fused_curve, probed_pcie_ipc_curve
from verifylab.model.pricing.pricer import Box
from verifylab.vocab import PCIE_IPC_FLASHINFER, PCIE_IPC_SGLANG, version_at_least


def pcie_ipc_missing(engine: str, target: LaunchTarget | None) -> str | None:
    """Why the engine served has no SGLang PCIe-IPC all-reduce to switch on, or None where it has one."""
    if engine != "sglang":
        return f"the engine served is {engine}; the switch is SGLang's"
    if target is None:
        return "no SGLang version to launch (give --sglang)"
    if target.has_pcie_ipc:
        return None
    if not version_at_least(target.version, PCIE_IPC_SGLANG):
        return f"SGLang {target.version or '(version unknown)'} has none (from {PCIE_IPC_SGLANG} on)"
    pinned = f"the FlashInfer SGLang {target.version} pins ({target.flashinfer or 'version unknown'})"
    return f"{pinned} has no kernel for it (from {PCIE_IPC_FLASHINFER} on)"


def probed_pcie_ipc(record: StoredInputs, box: Box, p2p_works: bool) -> tuple[AllreduceCurve, str] | str:
    """SGLang's PCIe-IPC all-reduce on the probed ``box`` (its public curve at the box's TP, the box's own NCCL past
    the workspace) and where that comes from; or why it is not priced: TP 1, P2P not working on the box (its probe's
    policy: the kernel writes into the peers' memory), no public curve at its TP."""
    if box.tp == 1 or box.allreduce_us is None:
        return "TP 1: no all-reduce"
    if not p2p_works:
        return "P2P does not work on this box, as its probe found, and the kernel writes into the peers' memory"
    ipc = probed_pcie_ipc_curve(regime_curves(record), box.tp, box.target.hidden, box.allreduce_us, box.comm_source)
    return ipc if ipc is not None else f"no public curve prices it at {box.tp} ranks"


def all_reduce_words(run_id: str, priced: tuple[AllreduceCurve, str] | str, fusion_on: bool = False) -> str:
    """`box --probe`'s all-reduce answer: what its launch command runs (NCCL, with fusion where its fusion answer is
    on; it has no load to choose by), and the command that chooses by goodput at the owner's load where another
    all-reduce is priced on the box (PCIe-IPC, fusion); else why PCIe-IPC is no option."""
    launched = "NCCL with FlashInfer's fused all-reduce + RMSNorm (fusion on, above)" if fusion_on else "NCCL"
    plan = f"`verifylab box --plan --probe {run_id}`"
    at_load = "by goodput at your load and SLO (--load, --slo-ttft-ms, --slo-tpot-ms)"
    if isinstance(priced, str):
        default = "" if fusion_on else ", SGLang's default"  # fusion is opt-in
        words = f"{launched}{default}; SGLang's PCIe-IPC all-reduce is not an option here: {priced}"
        return words + (f"; {plan} chooses between fusion and NCCL {at_load}" if fusion_on else "")
    if fusion_on:
        return (
            f"{launched}, in the launch command: SGLang's PCIe-IPC all-reduce also runs here, and {plan} chooses "
            f"among NCCL, fusion and PCIe-IPC {at_load}, launching the one ahead of NCCL"
        )
    return (
        "NCCL, SGLang's default, in the launch command: SGLang's PCIe-IPC all-reduce also runs here, and "
        f"{plan} chooses between the two {at_load}, launching PCIe-IPC where it is ahead"
    )


def fusion_refused(policy: Policy) -> str | None:
    """Why the probe's policy rules fusion out (its reason), or None where it allows it."""
    if policy.fusion_allowed:
        return None
    if not policy.tensor_parallel:  # no "fusion off" reason: the probe rules out the all-reduce itself
        return (
            "one GPU: no all-reduce to fuse" if policy.world == 1 else "no tensor parallelism here, as its probe found"
        )
    why = next((r for r in policy.reasons if r.startswith("fusion off")), "the probe's policy rules it out")
    return why.removeprefix("fusion off: ")


def probed_fusion(
    record: StoredInputs, box: Box, curves: list[Curve], path: str, policy: Policy
) -> tuple[AllreduceCurve, str] | str:
    """FlashInfer's fused all-reduce + RMSNorm on the probed ``box`` (its own fused curve on ``path``, as `box
    --probe` prices fusion), or why it is not priced: TP 1, the probe's policy, no fused curve, no norm kernel."""
    if box.tp == 1 or box.allreduce_us is None:
        return "TP 1: no all-reduce"
    refused = fusion_refused(policy)
    if refused is not None:
        return refused
    fused = next((c for c in curves if c.path == path and c.impl == "fused"), None)
    if fused is None:
        return f"the probe measured no fused curve on {path}"
    norm = record.runs.norm
    if norm is None:
        return "no run measured the norm kernel fusion replaces"
    norm_us = NormCurve(norm.tokens, norm.us)
    return probed_fused_curve(regime_curves(record), fused, norm_us, box.target.hidden, box.allreduce_us)
