"""SGLang's PCIe-IPC all-reduce (0.5.21+) as a gates audit reads it: its switch, the world sizes it serves and
what it needs from FlashInfer."""

from __future__ import annotations

import ast

from verifylab.gates.finding import Finding

PCIE_IPC_ROLE = "PCIe-IPC all-reduce"
PCIE_IPC_ENV = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"


def pcie_ipc_findings(tree: ast.AST, source: str, rel: str) -> list[Finding]:
    """SGLang's PCIe-IPC all-reduce (0.5.21+): its switch, the world sizes it serves and what it needs from
    FlashInfer; whether that FlashInfer is there is judged over the whole tree (``gates.inventory``)."""
    if PCIE_IPC_ENV not in source or "PcieIpcAllReduceWorkspace" not in source:
        return []
    sizes = next(
        (
            ast.literal_eval(node.value)
            for node in getattr(tree, "body", [])
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_SUPPORTED_WORLD_SIZES" for t in node.targets)
        ),
        None,
    )
    line = next((i for i, text in enumerate(source.splitlines(), 1) if "PcieIpcAllReduceWorkspace" in text), 1)
    return [
        Finding(
            rel,
            line,
            "<module>",
            "precondition",
            f"{PCIE_IPC_ENV}=1" + (f", world sizes {', '.join(map(str, sizes))}" if sizes else ""),
            "info",
            PCIE_IPC_ROLE,
            "opt-in (off by default); it needs FlashInfer's pcie_ipc_comm (flashinfer.comm.PcieIpcAllReduceWorkspace), "
            "and without it logs a warning and stays on NCCL; every GPU pair needs P2P",
        )
    ]
