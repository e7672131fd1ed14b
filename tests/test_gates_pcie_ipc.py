"""#51: `gates audit` names SGLang's PCIe-IPC all-reduce (0.5.21+) with its own conditions — the opt-in switch, the
world sizes it serves — and judges it against the FlashInfer beside it: open with ``pcie_ipc_comm`` (0.7.0+),
closed without (SGLang then warns and stays on NCCL). The 0.5.21/0.5.22 wheels read the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifylab.gates.inventory import audit
from verifylab.gates.scan import PCIE_IPC_ROLE

SGLANG_SOURCE = """
_SUPPORTED_WORLD_SIZES = (2, 4, 8)


def enabled(envs):
    return envs.SGLANG_ENABLE_PCIE_IPC_ALLREDUCE.get()


def workspace():
    from flashinfer.comm import PcieIpcAllReduceWorkspace
    return PcieIpcAllReduceWorkspace
"""


def tree(root: Path, flashinfer_has_it: bool) -> Path:
    module = root / "sglang" / "srt" / "distributed" / "device_communicators" / "pcie_ipc_ar.py"
    module.parent.mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    module.write_text(SGLANG_SOURCE)
    comm = root / "flashinfer" / "comm"
    comm.mkdir(parents=True)
    (root / "flashinfer" / "__init__.py").write_text("")
    if flashinfer_has_it:
        (comm / "pcie_ipc_ar.py").write_text("class PcieIpcAllReduceWorkspace: ...\n")
    return root


@pytest.mark.parametrize(("has_it", "status", "words"), [(True, "open", "has it"), (False, "closed", "falls back")])
def test_the_pcie_ipc_path_is_judged_by_the_flashinfer_beside_it(tmp_path, has_it, status, words):
    found = [f for f in audit(tree(tmp_path, has_it)).findings if f.role == PCIE_IPC_ROLE]
    assert len(found) == 1
    assert found[0].status == status and words in found[0].note
    assert "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1" in found[0].expression and "2, 4, 8" in found[0].expression
