"""The decision model (#25): no option's compute below its floor; EP with TP attention keeps 122 all-reduces; every
option's communication computed at its own message size and bounded by bandwidth; fusion needs P2P; regimes,
memory and the answers follow from the evidence."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from verifylab.model.answers.decision import decision_table, regime_answer, thresholds
from verifylab.model.case.cycle import cycle_account
from verifylab.model.case.option_prices import option_pass
from verifylab.model.case.option_tables import memory_table
from verifylab.model.case.options import GPUS, OPTIONS, Option
from verifylab.model.case.speculation import inputs
from verifylab.model.case.whatif import case_option_boxes, whatif_table
from verifylab.model.inputs.model_costs import Layout, busiest_gpu_experts
from verifylab.model.inputs.stored import stored_inputs
from verifylab.model.pricing.floors import pass_bytes
from verifylab.model.pricing.regimes import PRICED_REGIMES, Collective, Price
from verifylab.store.evidence import Evidence
from verifylab.vocab import KIMI_K2_HIDDEN, Regime

STREAMS = (1, 2, 8, 32, 64)


@pytest.fixture(scope="module")
def ev(shipped) -> Evidence:
    return shipped


def _passes(ev):
    m = case_option_boxes(stored_inputs(ev))
    for regime in PRICED_REGIMES:
        for option in OPTIONS:
            for streams in STREAMS:
                for k in cycle_account(stored_inputs(ev)).draft_tokens:
                    yield option_pass(m, option, regime, streams, k)


def test_no_option_computes_below_its_floor(ev):
    for p in _passes(ev):
        if p.verify is not None:
            assert p.compute.low >= p.floor_ms - 1e-9, (p.option, p.regime, p.streams, p.k)
            assert p.verify.low >= p.floor_ms


def test_ep_with_tp_attention_keeps_every_allreduce_and_reads_whole_experts(ev):
    for p in _passes(ev):
        if p.option is Option.EP8_TP_ATTENTION:
            assert p.allreduces == 122
    assert busiest_gpu_experts(28, 8, 384) > 28 / 8  # the busiest GPU reads more than the average share
    for tokens in (1, 4, 32, 256):
        tp = pass_bytes(tokens, Layout.TP).experts
        ep = pass_bytes(tokens, Layout.EP_TP_ATTENTION).experts
        assert ep >= tp * (1 - 1e-9)


def test_only_dp_attention_with_ep_removes_the_allreduces(ev):
    counts = {(p.option, p.streams): p.allreduces for p in _passes(ev)}
    assert {c for (o, _), c in counts.items() if o is Option.DP_ATTENTION_EP8} == {0}
    assert {c for (o, _), c in counts.items() if o is not Option.DP_ATTENTION_EP8} == {122}


@pytest.mark.parametrize("regime", PRICED_REGIMES)
def test_communication_is_priced_at_its_own_message_and_bounded_by_bandwidth(ev, regime):
    curves = inputs(stored_inputs(ev)).curves
    link = curves.link_gbs * 1e3  # bytes per us
    for world in (4, 8):
        previous = 0.0
        for tokens in (1, 4, 16, 64, 256, 512):
            message = tokens * KIMI_K2_HIDDEN * 2
            nccl = curves.price(regime, Collective.NCCL, world, message)
            assert isinstance(nccl, Price)
            ring_wire = 2 * (world - 1) / world * message / link  # even on a full-speed link
            assert nccl.low_us >= ring_wire * 0.999, (regime, world, tokens)
            assert nccl.high_us >= previous  # grows with the message
            previous = nccl.high_us
            fused = curves.price(regime, Collective.FUSED, world, message)
            if regime is Regime.HEALTHY_P2P:
                assert isinstance(fused, Price)
                assert fused.low_us >= min(message * (world - 1) / link, 2 * (world - 1) / world * message / link)
            else:
                assert isinstance(fused, str) and "P2P" in fused  # the fused kernel needs working P2P


def test_under_load_each_option_pays_its_own_message(ev):
    m = case_option_boxes(stored_inputs(ev))
    one = option_pass(m, Option.TP8_NCCL, Regime.HEALTHY_P2P, 1, 4)
    many = option_pass(m, Option.TP8_NCCL, Regime.HEALTHY_P2P, 32, 4)
    price = m.curves.price(Regime.HEALTHY_P2P, Collective.NCCL, GPUS, 32 * 4 * KIMI_K2_HIDDEN * 2)
    assert many.comm.high == pytest.approx(122 * price.high_us / 1e3, rel=0.02)  # the regime's curve at its message
    assert many.comm.high > one.comm.high


def test_the_option_row_and_the_decision_row_are_one_pricing(ev):
    """TP 8, NCCL in the options table is the speculation case's box: its plain decoding and EAGLE-3 tok/s are the
    decision row's, per stream (#50: one pricer)."""
    from verifylab.model.case.speculation import speculation_case

    for regime, case in speculation_case(stored_inputs(ev)).items():
        for streams in (1, 8, 32):
            row = (
                whatif_table(stored_inputs(ev), streams)
                .set_index(["regime_key", "key"])
                .loc[(regime.value, "tp8_nccl")]
            )
            plain = case.plain_at(streams)
            assert row["plain_tokens_per_s_low"] == pytest.approx(plain.low / streams)
            assert row["plain_tokens_per_s_high"] == pytest.approx(plain.high / streams)
        answer = regime_answer(ev, regime)
        one = whatif_table(stored_inputs(ev), 1).set_index(["regime_key", "key"]).loc[(regime.value, "tp8_nccl")]
        assert (one["tokens_per_s_low"], one["tokens_per_s_high"]) == pytest.approx(
            (answer.eagle_tps.low, answer.eagle_tps.high)
        )  # the decision row's EAGLE-3 tok/s, and its ratio to plain decoding is the gain beside it


def test_the_reported_regime_is_the_pass_less_its_floor(ev):
    a, m = cycle_account(stored_inputs(ev)), inputs(stored_inputs(ev))
    low, high, _ = m.curves.reported_allreduce
    assert low < high <= a.allreduce_us_before
    assert (a.verify_ms - high * a.allreduces / 1e3) > 0  # what is left for compute and norms


def test_thresholds_order_the_regimes(ev):
    bands = thresholds(ev)
    healthy, host = bands[Regime.HEALTHY_P2P.value], bands[Regime.HOST_MEMORY.value]
    assert healthy.high_us < host.low_us


def test_the_answers_and_the_table(ev):
    healthy = regime_answer(ev, Regime.HEALTHY_P2P)
    host = regime_answer(ev, Regime.HOST_MEMORY)
    assert healthy.fused_tps is not None and host.fused_tps is None
    assert healthy.eagle_tps.mid > host.eagle_tps.mid
    table = decision_table(ev)
    assert list(table["regime_key"]) == [r.value for r in PRICED_REGIMES]
    assert (table["provenance"] == "modelled").all()
    rows = whatif_table(stored_inputs(ev), 8)
    assert set(rows["regime_key"]) == {r.value for r in PRICED_REGIMES}
    assert rows.loc[rows["key"] == "tp8_fused", "not_priced"].str.contains("P2P").sum() == 2


def test_memory_counts_replicated_weights_once_per_gpu():
    table = memory_table().set_index(["layout", "mem_fraction"])
    tp = table.loc[("TP 8 (NCCL or fusion), EP 8 with TP attention", 0.9)]
    dp = table.loc[("DP attention + EP 8", 0.9)]
    assert 60 < tp["weights_gib_per_gpu"] < 80  # about a 1T-parameter INT4 model over 8 GPUs
    assert dp["weights_gib_per_gpu"] > tp["weights_gib_per_gpu"]  # attention replicated on every GPU
    assert dp["weights_gib_per_gpu"] - tp["weights_gib_per_gpu"] < 15  # ... once per GPU, not eight times
    assert math.isclose(  # the card's usable memory as it reports it: 97887 MiB, not the datasheet's "96 GB"
        table.loc[("DP attention + EP 8", 0.95), "kv_room_gib_per_gpu"] - dp["kv_room_gib_per_gpu"],
        0.05 * 97887 / 1024,
    )
    assert dp["fits"]  # with experts on Kimi's 60 MoE layers (its first is dense), DP attention fits at 0.90


def test_expert_weights_are_counted_on_the_moe_layers_only():
    from verifylab.model.inputs.configs import kimi_k25_costs
    from verifylab.model.inputs.model_costs import Layout
    from verifylab.model.pricing.floors import weights_per_gpu_bytes

    assert weights_per_gpu_bytes(Layout.TP, 8) == pytest.approx(kimi_k25_costs().weights_bytes(8), rel=1e-12)


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_a_probe_of_an_8_gpu_box_prices_its_own_row(data_dir):
    """A stored probe at the case study's TP size adds 'this box (probe)': its measured curve prices the options
    and the decision page names it (#26 item 2)."""
    import json
    import shutil

    from verifylab.model.answers.decision import decision_table
    from verifylab.publish.decision import decision_markdown
    from verifylab.publish.findings import key_findings

    source = data_dir / "runs" / "20261201-092338-2xh200-probe-p2p"
    target = data_dir / "runs" / "20261201-120000-box-probe"
    shutil.copytree(source, target)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest |= {"run_id": target.name, "gpu_count": 8, "label": "8 x RTX PRO 6000 (PCIe)"}
    (target / "manifest.json").write_text(json.dumps(manifest))
    latency = pd.read_csv(target / "allreduce_latency.csv")
    latency["ranks"] = latency["ranks"].where(latency["group"] != "all", 8)
    latency["us"] = latency["us"] * 3  # a slower box than the two H200s
    latency.to_csv(target / "allreduce_latency.csv", index=False)
    verdict = pd.read_csv(target / "verdict.csv").assign(world=8)
    verdict.to_csv(target / "verdict.csv", index=False)

    ev = Evidence(data_dir)
    table = decision_table(ev).set_index("regime_key")
    assert Regime.MEASURED.value in table.index
    measured = latency[(latency["impl"] == "nccl") & (latency["mode"] == "graph") & (latency["group"] == "all")]
    at_4 = float(measured.loc[measured["tokens"] == 4, "us"].iloc[0])
    assert table.loc[Regime.MEASURED.value, "allreduce_57kb_us"] == f"{at_4:.0f}-{at_4:.0f}"
    edition = {"id": "x", "built": "now", "runs": [], "key_findings": key_findings(ev)}
    page = decision_markdown(edition, ev)
    from verifylab.report.section import md_text

    assert md_text("run 20261201-120000-box-probe") in page and "this box (probe)" in page


def test_a_price_kept_by_the_model_follows_an_input_set_later(ev):
    """The model keeps each price it computed (pages ask for the same one hundreds of times); setting an input
    anew, as the options' inputs set the reported range once the floor is known, drops what was kept."""
    from verifylab.model.fits.in_pass import regime_curves

    curves = regime_curves(stored_inputs(ev))
    message = 4 * KIMI_K2_HIDDEN * 2
    assert isinstance(curves.price(Regime.DEGRADED, Collective.NCCL, 8, message), str)  # no reported range yet
    curves.reported_allreduce = (150.0, 205.0, message)
    price = curves.price(Regime.DEGRADED, Collective.NCCL, 8, message)
    assert isinstance(price, Price) and (price.low_us, price.high_us) == (150.0, 205.0)


def test_no_fastest_option_is_one_sglang_refuses_with_eagle3(shipped):
    """TP 4 x PP 2 may price fastest, but SGLang 0.5.9 and 0.5.17 refuse pipeline parallelism with speculative
    decoding: the decision names only options it can deploy with EAGLE-3."""
    from verifylab.model.answers.decision import deployable_with_eagle3, regime_answer
    from verifylab.model.case.options import OPTIONS, Option
    from verifylab.vocab import Regime

    assert Option.TP4_PP2 not in deployable_with_eagle3()
    ev = shipped
    for regime in (Regime.HEALTHY_P2P, Regime.HOST_MEMORY, Regime.DEGRADED):
        for key in regime_answer(ev, regime).best_by_load.values():
            assert not OPTIONS[Option(key)].eagle3.startswith("no"), (regime, key)


def test_speculation_by_accept_length_rises_with_the_accept_length(shipped):
    from verifylab.model.answers.decision import speculation_by_accept

    table = speculation_by_accept(shipped)
    for _, part in table.groupby("regime"):
        lows = [float(text.split("-")[0]) for text in part.sort_values("accept_length")["gain_one_stream"]]
        assert lows == sorted(lows) and len(lows) == 4


def test_the_components_chart_calls_elimination_s_collective_an_all_to_all(shipped):
    """DP attention + EP removes the all-reduces: its communication is an all-to-all, never drawn as all-reduce."""
    from verifylab.chapters import ch04_fusion_vs_elimination as chapter

    data = chapter.whatif_figure(shipped, chapter.Params()).chart.data
    elimination = set(data.loc[data["kind"] == "dp_attention_ep8", "component"])
    assert "all-to-all" in elimination and "all-reduce" not in elimination
    assert "all-to-all" not in set(data.loc[data["kind"] != "dp_attention_ep8", "component"])
    assert "all-reduce" in set(data["component"])


def _ends(text: str) -> tuple[float, float]:
    """``85-100`` or ``92`` as its two ends."""
    low, _, high = text.partition("-")
    return float(low), float(high or low)


def test_each_ratio_is_the_ratio_of_the_tok_s_beside_it(ev):
    """#50: a reviewer dividing the EAGLE-3 range's ends by plain decoding's gets the gain column (to the digits
    shown), with and without fusion: one model prices the row."""
    for row in decision_table(ev).to_dict("records"):
        plain, eagle, gain = _ends(row["decode_tok_s"]), _ends(row["eagle3_tok_s"]), _ends(row["eagle3_gain_x"])
        for p, e, g in zip(plain, eagle, gain, strict=True):
            assert e / p == pytest.approx(g, abs=0.01 + 0.6 / p), row["regime"]
        answer = regime_answer(ev, Regime(row["regime_key"]))
        if answer.fused_tps is not None:
            assert answer.fused_tps.low / answer.decode_tps.low == pytest.approx(answer.fused_gain.low)
            assert answer.fused_tps.high / answer.decode_tps.high == pytest.approx(answer.fused_gain.high)


def test_one_plain_decoding_range_per_regime(ev):
    """The decision page's plain decoding at one stream is the speculation model's, the rate its gain and crossover
    are priced against: calibrated to the reported 92.6 tok/s wherever the regime allows it."""
    from verifylab.model.case.speculation import speculation_case

    for row in decision_table(ev).to_dict("records"):
        case = speculation_case(stored_inputs(ev))[Regime(row["regime_key"])]
        assert row["decode_tok_s"] == case.plain_at(1).text(0)
        if case.consistent:
            low, high = _ends(row["decode_tok_s"])
            assert low <= 92.6 <= high


def test_fusion_is_priced_per_draft_token_count(ev):
    """#50: fusion's saving is NCCL less fused at the same draft tokens, never a best NCCL beside a worst fused."""
    saving = regime_answer(ev, Regime.HEALTHY_P2P).fusion_gain_by_load[max(STREAMS[:4])]
    assert saving is not None and set(saving.by_draft_tokens) == set(cycle_account(stored_inputs(ev)).draft_tokens)
    text = saving.gain_text(2, "ms")
    for k in saving.by_draft_tokens:
        assert f"at {k} draft tokens" in text
    assert "--" not in saving.text(2)


def test_the_fastest_option_reads_in_words():
    from verifylab.model.answers.words import fastest_words

    one = fastest_words({1: "tp8_pcie_ipc", 8: "tp8_pcie_ipc", 32: "tp8_pcie_ipc"})
    assert one == "TP 8, PCIe-IPC all-reduce at every load priced (1, 8, 32 streams)"
    assert fastest_words({1: "tp8_nccl", 32: "dp_attention_ep8"}) == (
        "1 stream: TP 8, NCCL (as run); 32 streams: DP attention + EP 8 (all-to-all)"
    )


def test_a_gain_that_comes_back_above_one_is_said():
    """#50: a crossover is not only the first crossing: a gain that falls below 1 and rises again at more streams
    says so, from its earliest end; one that stays below says nothing more."""
    from verifylab.model.answers.words import recrossing_words
    from verifylab.model.pricing.speculation import GainRow
    from verifylab.span import Span

    def rows(gains: list[tuple[float, float]]) -> list[GainRow]:
        none = Span(1.0, 1.0)
        return [GainRow(2**i, none, none, Span(lo, hi)) for i, (lo, hi) in enumerate(gains)]

    back = rows([(1.2, 1.3), (0.9, 1.0), (0.8, 0.9), (0.9, 1.05), (0.95, 1.2)])  # 1, 2, 4, 8, 16 streams
    words = recrossing_words(back)
    assert words.startswith(", and may pay again from ") and words.endswith(" streams (its optimistic end)")
    assert float(words.split("from ")[1].split()[0]) < 8  # the optimistic end comes back between 4 and 8
    both = rows([(1.2, 1.3), (0.8, 0.9), (0.8, 0.9), (1.1, 1.2), (1.1, 1.2)])
    assert recrossing_words(both).startswith(", and pays again from ")
    assert recrossing_words(rows([(1.2, 1.3), (0.9, 1.0), (0.8, 0.9)])) == ""
