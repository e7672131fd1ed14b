"""#81: collectives priced as SGLang falls back. A reduction past the PCIe-IPC all-reduce's decode-sized workspace is
priced as NCCL (SGLang hands it to NCCL), and inside it the price is never below its own source at a size the source
measured (no in-pass factor was measured for it); no answer offers SGLang's custom all-reduce above two PCIe GPUs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from verifylab.model.case.speculation import inputs
from verifylab.model.inputs.stored import stored_inputs
from verifylab.model.pricing.regimes import PCIE_IPC_WORKSPACE_ROWS, Collective
from verifylab.publish.decision import _regimes, regime_rules
from verifylab.store.evidence import Evidence
from verifylab.vocab import KIMI_K2_HIDDEN, Regime

ROOT = Path(__file__).resolve().parents[1]


def test_pcie_ipc_past_its_workspace_is_nccl_and_never_below_its_own_source_inside_it():
    ev = Evidence(ROOT / "data")
    curves = inputs(stored_inputs(ev)).curves
    bound = PCIE_IPC_WORKSPACE_ROWS * KIMI_K2_HIDDEN * 2
    for world in (4, 8):
        for message in np.geomspace(1024, 64 << 20, 40):
            ipc = curves.price(Regime.HEALTHY_P2P, Collective.PCIE_IPC, world, float(message))
            nccl = curves.price(Regime.HEALTHY_P2P, Collective.NCCL, world, float(message))
            if message > bound and not isinstance(nccl, str):  # handed to NCCL: never priced above it
                assert not isinstance(ipc, str) and (ipc.low_us, ipc.high_us) == (nccl.low_us, nccl.high_us)
    public = ev.public
    rows = public[(public["implementation"] == "pcie_ipc") & (pd.to_numeric(public["message_bytes"]) <= bound)]
    assert not rows.empty
    for row in rows.itertuples():  # at a size its source measured, no factor takes it below the source
        us = float(row.value) * (1e3 if row.unit == "ms" else 1.0)
        ipc = curves.price(Regime.HEALTHY_P2P, Collective.PCIE_IPC, int(row.world_size), float(row.message_bytes))
        assert not isinstance(ipc, str) and ipc.low_us >= us * (1 - 1e-9), (row.id, ipc.low_us, us)


def test_the_workspace_is_counted_in_the_served_models_rows():
    """SGLang sizes PCIe-IPC's workspace in rows of the served model's hidden size: a reduction of 100 rows of a
    hidden size of 2,048 is past it (NCCL's price), the same bytes for Kimi-K2's 7,168 (28 rows) are within it."""
    curves = inputs(stored_inputs(Evidence(ROOT / "data"))).curves
    message = 100 * 2048 * 2.0
    assert PCIE_IPC_WORKSPACE_ROWS * 2048 * 2 < message < PCIE_IPC_WORKSPACE_ROWS * KIMI_K2_HIDDEN * 2
    small = curves.price(Regime.HEALTHY_P2P, Collective.PCIE_IPC, 8, message, 2048)
    kimi = curves.price(Regime.HEALTHY_P2P, Collective.PCIE_IPC, 8, message, KIMI_K2_HIDDEN)
    nccl = curves.price(Regime.HEALTHY_P2P, Collective.NCCL, 8, message)
    assert not isinstance(small, str) and not isinstance(kimi, str) and not isinstance(nccl, str)
    assert (small.low_us, small.high_us) == (nccl.low_us, nccl.high_us) and small.basis.startswith("NCCL: ")
    assert not kimi.basis.startswith("NCCL: ")


def test_no_answer_offers_the_custom_all_reduce_above_two_pcie_gpus():
    ev = Evidence(ROOT / "data")
    r = _regimes(ev)
    rules = regime_rules(ev, r[Regime.HEALTHY_P2P.value], r[Regime.HOST_MEMORY.value])
    for sentence in rules.split(". "):
        if "custom all-reduce" in sentence:
            assert "refuses more than two PCIe-only GPUs" in sentence, sentence
