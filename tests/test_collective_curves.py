"""#51: each collective is priced from its own curve — NCCL from the public NCCL rows, FlashInfer's fused kernel from
the one-shot rows, SGLang's PCIe-IPC all-reduce (0.5.21+, FlashInfer 0.7.0+) from its own rows — and carries its
version requirements into the options and the decision."""

from __future__ import annotations

from dataclasses import replace

import pytest

from verifylab.model.answers.decision import decision_table, regime_answer
from verifylab.model.case.options import OPTIONS, Option
from verifylab.model.case.speculation import inputs
from verifylab.model.inputs.stored import stored_inputs
from verifylab.model.pricing.regimes import Collective, Price
from verifylab.vocab import KIMI_K2_HIDDEN, PCIE_IPC_FLASHINFER, PCIE_IPC_SGLANG, Regime

MESSAGE = 4 * KIMI_K2_HIDDEN * 2  # one stream's verify message at 4 draft tokens
OWN_ROWS = {Collective.NCCL: ("nccl",), Collective.FUSED: ("oneshot", "custom"), Collective.PCIE_IPC: ("pcie_ipc",)}


@pytest.fixture(scope="module")
def curves(shipped):
    return inputs(stored_inputs(shipped)).curves


def _scaled(curves, implementations: tuple[str, ...], factor: float):
    """The same curves with some implementations' public latencies scaled by ``factor``."""
    public = curves.public.copy()
    rows = public["implementation"].astype(str).str.startswith(implementations) & (public["unit"] == "us")
    public.loc[rows, "value"] = public.loc[rows, "value"] * factor
    return replace(curves, public=public)


@pytest.mark.parametrize("collective", list(OWN_ROWS))
def test_each_collective_moves_with_its_own_rows_only(curves, collective):
    before = {c: curves.price(Regime.HEALTHY_P2P, c, 8, MESSAGE) for c in OWN_ROWS}
    after_curves = _scaled(curves, OWN_ROWS[collective], 2.0)
    for other, price in before.items():
        moved = after_curves.price(Regime.HEALTHY_P2P, other, 8, MESSAGE)
        assert isinstance(price, Price) and isinstance(moved, Price)
        if other is collective:
            assert moved.high_us > price.high_us * 1.3, f"{other} did not follow its own rows"
        else:
            assert (moved.low_us, moved.high_us) == pytest.approx((price.low_us, price.high_us)), (
                f"{other} moved with {collective}'s rows"
            )


def test_pcie_ipc_is_priced_from_its_public_curve_where_p2p_works(curves):
    price = curves.price(Regime.HEALTHY_P2P, Collective.PCIE_IPC, 8, 12288)
    assert isinstance(price, Price) and "pub-56" in price.basis
    assert price.low_us == pytest.approx(5.3)  # the 12 KiB row as published: no factor was measured for this kernel
    assert isinstance(curves.price(Regime.HOST_MEMORY, Collective.PCIE_IPC, 8, 12288), str)
    degraded = curves.price(Regime.DEGRADED, Collective.PCIE_IPC, 8, 12288)
    assert isinstance(degraded, str) and "needs working P2P" in degraded  # #68: never offered where P2P is broken
    assert isinstance(curves.price(Regime.HEALTHY_P2P, Collective.PCIE_IPC, 4, 12288), str)  # no 4-rank curve


def test_the_pcie_ipc_option_names_its_versions_and_reaches_the_decision(shipped):
    facts = OPTIONS[Option.TP8_PCIE_IPC]
    assert PCIE_IPC_SGLANG in facts.flags and PCIE_IPC_FLASHINFER in facts.flags
    assert "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1" in facts.flags
    ev = shipped
    healthy = regime_answer(ev, Regime.HEALTHY_P2P)
    assert healthy.ipc_decode_tps is not None and healthy.ipc_decode_tps.low > healthy.decode_tps.low
    assert regime_answer(ev, Regime.HOST_MEMORY).ipc_gain is None
    row = decision_table(ev).set_index("regime_key").loc[Regime.HOST_MEMORY.value]
    assert row["pcie_ipc_eagle3_tok_s"].startswith("cannot run")
