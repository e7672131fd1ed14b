"""Which all-reduce a probed box runs: NCCL as its probe measured it (SGLang's default), and SGLang's PCIe-IPC
all-reduce where it is priced there, or why it is not. One rule for `box --probe`'s all-reduce answer and the choice
`box --plan --probe` makes between the two by goodput."""

from __future__ import annotations

from verifylab.launch import LaunchTarget
from verifylab.model.fits.in_pass import regime_curves
from verifylab.model.inputs.stored import StoredInputs
from verifylab.model.pricing.boxes import AllreduceCurve, probed_pcie_ipc_curve
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


def all_reduce_words(run_id: str, priced: tuple[AllreduceCurve, str] | str) -> str:
    """`box --probe`'s all-reduce answer: NCCL in its launch command (it has no load to choose by), and where
    PCIe-IPC is priced on the box, the command that chooses between the two at the owner's load; else why not."""
    if isinstance(priced, str):
        return f"NCCL, SGLang's default; SGLang's PCIe-IPC all-reduce is not an option here: {priced}"
    return (
        "NCCL, SGLang's default, in the launch command: SGLang's PCIe-IPC all-reduce also runs here, and "
        f"`verifylab box --plan --probe {run_id}` chooses between the two by goodput at your load and SLO (--load, "
        "--slo-ttft-ms, --slo-tpot-ms), launching PCIe-IPC where it is ahead"
    )
