"""#68 item 3: collectives priced no better than their sources. At every size a source measured, a collective's price
by itself (without the in-pass factor, which is its own term with its evidence) is the sources' figures there or
their interpolation; outside every source's sizes the price says it is extrapolated and how far; no 'fastest' rests
on an extrapolated price or on a tie, and a tie is named with the measurement that breaks it."""

from __future__ import annotations

import pytest

from verifylab.model.answers.decision import TIE_MARGIN, decided_faster, fastest_caveat, regime_answer
from verifylab.model.answers.words import fastest_words
from verifylab.model.case.speculation import inputs
from verifylab.model.inputs.stored import stored_inputs
from verifylab.model.pricing.regimes import PCIE_IPC_WORKSPACE_ROWS, Collective, Price, extrapolation
from verifylab.span import Span
from verifylab.vocab import KIMI_K2_HIDDEN, LOAD_STREAMS, Regime

PREFIXES = {Collective.NCCL: ("nccl",), Collective.FUSED: ("oneshot", "custom"), Collective.PCIE_IPC: ("pcie_ipc",)}


@pytest.fixture(scope="module")
def curves(shipped):
    return inputs(stored_inputs(shipped)).curves


def test_at_every_size_a_source_measured_the_price_alone_is_the_sources(curves):
    checked = 0
    for collective, prefixes in PREFIXES.items():
        for world in (2, 4, 8):
            sources = curves._curves(world, prefixes)
            for size in sorted({x for c in sources for x in c.message_bytes}):
                if collective is Collective.PCIE_IPC and size > PCIE_IPC_WORKSPACE_ROWS * KIMI_K2_HIDDEN * 2:
                    continue  # handed to NCCL by SGLang (test_collectives_fall_back)
                price = curves.price(Regime.HEALTHY_P2P, collective, world, size)
                assert isinstance(price, Price), price
                there = [c.at(size) for c in sources if c.message_bytes[0] <= size <= c.message_bytes[-1]]
                low, high = price.alone_us
                assert (low, high) == pytest.approx((min(there), max(there))), (collective, world, size)
                assert price.extrapolated == ""
                if price.in_pass != (1.0, 1.0):  # the in-pass factor: its own term, its evidence in the basis
                    scaled = (low * price.in_pass[0], high * price.in_pass[1])
                    assert (price.low_us, price.high_us) == pytest.approx(scaled)
                    assert "inside a pass (fitted on the H200 traces)" in price.basis
                checked += 1
    assert checked >= 30  # NCCL at 2, 4 and 8 ranks, the one-shot curves, the PCIe-IPC curve


def test_pcie_ipc_is_the_docstrings_5_3_us_at_12_kib_and_hands_its_100_mib_point_to_nccl(curves):
    price = curves.price(Regime.HEALTHY_P2P, Collective.PCIE_IPC, 8, 12288)
    assert (price.low_us, price.high_us) == pytest.approx((5.3, 5.3)) and price.in_pass == (1.0, 1.0)  # no factor
    at_100_mib = curves.price(Regime.HEALTHY_P2P, Collective.PCIE_IPC, 8, 104857600)
    nccl = curves.price(Regime.HEALTHY_P2P, Collective.NCCL, 8, 104857600)
    assert (at_100_mib.low_us, at_100_mib.high_us) == (
        nccl.low_us,
        nccl.high_us,
    ) and "handed to NCCL" in at_100_mib.basis


def test_outside_every_sources_sizes_the_price_says_how_far(curves):
    largest = max(c.message_bytes[-1] for c in curves._curves(8, ("nccl",)))
    past = curves.price(Regime.HEALTHY_P2P, Collective.NCCL, 8, 3.5 * largest)
    assert past.extrapolated == f"extrapolated 3.5x past the largest size measured ({largest / 1024:.0f} KiB)"
    assert extrapolation([(1000.0, 4000.0)], 250.0) == "held at the smallest size measured (1 KiB, 4.0x the message)"
    gap = extrapolation([(1000.0, 4000.0), (8000.0, 16000.0)], 6000.0)
    assert gap == "extrapolated between two sources' sizes (4 and 8 KiB)"
    assert extrapolation([(1000.0, 4000.0), (3000.0, 9000.0)], 6000.0) == ""


def test_a_tie_is_compared_end_by_end_and_named():
    assert decided_faster(Span(10.0, 20.0), Span(11.0, 21.0))  # faster at both ends by more than the margin
    assert not decided_faster(Span(10.0, 20.0), Span(11.0, 20.1))  # the high ends within TIE_MARGIN
    assert not decided_faster(Span(10.0, 30.0), Span(11.0, 20.0))  # the order changes between the ends
    assert TIE_MARGIN == 0.02
    words = fastest_words({1: "tp8_nccl", 8: "tp8_nccl"}, {8: "a tie with X"})
    assert words.startswith("1 stream: TP 8, NCCL (as run); 8 streams: TP 8, NCCL (as run) ahead on its midpoint only")
    assert words.endswith("a tie with X") and "at every load priced" not in words
    assert fastest_words({1: "tp8_nccl", 8: "tp8_nccl"}).endswith("at every load priced (1, 8 streams)")


@pytest.mark.parametrize("regime", [Regime.HEALTHY_P2P, Regime.HOST_MEMORY, Regime.DEGRADED])
def test_no_fastest_rests_on_a_tie_or_an_extrapolated_price(shipped, regime):
    from verifylab.model.answers.decision import deployable_with_eagle3
    from verifylab.model.case.whatif import whatif_table

    answer = regime_answer(shipped, regime)
    for streams in LOAD_STREAMS:
        table = whatif_table(stored_inputs(shipped), streams).set_index(["regime_key", "key"])
        priced = {
            k.value: Span(row["verify_ms_low"], row["verify_ms_high"])
            for k in deployable_with_eagle3()
            if not (row := table.loc[(regime.value, k.value)]).isna()["verify_ms_low"]
        }
        caveat = fastest_caveat(shipped, regime, streams, priced)
        assert answer.best_caveat_by_load.get(streams, "") == caveat
        if not caveat:  # decided: faster than every other option at both ends, on prices within their sources
            best = priced[answer.best_by_load[streams]]
            assert all(decided_faster(best, span) for k, span in priced.items() if k != answer.best_by_load[streams])
        else:
            assert "ahead on its midpoint only" in answer.fastest_at(streams)
            assert any(w in caveat for w in ("`verifylab box --plan`", "a measurement of both", "extrapolated"))


def test_a_tie_names_the_owners_command_only_where_it_launches_both(shipped):
    """A tie of the two all-reduces `box --plan` chooses between (NCCL, PCIe-IPC) is broken by it (and by its
    `--verify` where its goodput ties too); a tie with a layout it never launches, by a measurement of both."""
    tie = {"tp8_nccl": Span(35.0, 55.9), "tp8_pcie_ipc": Span(34.6, 54.1)}
    assert "`verifylab box --plan` on the box chooses between them" in fastest_caveat(
        shipped, Regime.HEALTHY_P2P, 8, tie
    )
    layout = {"tp8_nccl": Span(35.0, 55.9), "dp_attention_ep8": Span(34.6, 54.1)}
    caveat = fastest_caveat(shipped, Regime.HEALTHY_P2P, 8, layout)
    assert "a measurement of both on the box breaks it" in caveat and "box --plan" not in caveat


def test_fusion_by_load_says_where_it_rests_on_prices_outside_their_sources(shipped):
    """#68 item 5: fusion's switch at a load whose fused or NCCL price lies past its sources is flagged with the
    distance, at the launch command's draft tokens; a load within them carries no flag."""
    from verifylab.model.answers.decision import fusion_extrapolation
    from verifylab.publish.first_screen import fusion_at_chain_words
    from verifylab.vocab import COMMAND_DRAFT_TOKENS

    answer = regime_answer(shipped, Regime.HEALTHY_P2P)
    assert answer.fusion_extrapolated_by_load == {
        c: w for c in LOAD_STREAMS if (w := fusion_extrapolation(shipped, Regime.HEALTHY_P2P, c))
    }
    assert 1 not in answer.fusion_extrapolated_by_load  # one stream's verify message: within the sources
    from verifylab.publish.first_screen import undecided_words

    words = fusion_at_chain_words(answer, COMMAND_DRAFT_TOKENS)
    below = undecided_words(answer)
    for streams, beyond in answer.fusion_extrapolated_by_load.items():
        assert beyond.count("extrapolated") >= 1 and f"at {streams} streams, {beyond}" in below
        if f"from {streams} streams" in words:
            assert f"from {streams} streams (on prices past their sources' sizes: see below)" in words
