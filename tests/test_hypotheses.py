"""#51: the hypotheses for the case study's jump are ordered by a stated evidence rule — observations for less those
against, a seed line or an audited wheel fact weighing twice a measurement elsewhere, a public report or a model
result — with the size of what each could explain only breaking ties; the page shows for and against."""

from __future__ import annotations

import pytest

from verifylab.chapters import ch04_fusion_vs_elimination as ch04
from verifylab.model.case.hypotheses import (
    ORDER_RULE,
    WEIGHTS,
    Observation,
    deciding_between_top_two,
    evidence_score,
    ranked_hypotheses,
)
from verifylab.model.inputs.stored import stored_inputs
from verifylab.store.evidence import Evidence


@pytest.fixture(scope="module")
def ev(shipped) -> Evidence:
    return shipped


def test_the_score_weighs_the_case_studys_record_and_the_wheels_twice():
    seed, public = Observation("a", "seed", "seed 002"), Observation("b", "public", "pub-1")
    assert evidence_score([seed], []) == 2 * evidence_score([public], [])
    assert evidence_score([public, public], [seed]) == 0
    with pytest.raises(ValueError, match="hunch"):
        Observation("c", "hunch", "nowhere")
    assert all(kind in ORDER_RULE for kind in ("seed", "wheels")) and set(WEIGHTS) >= {"seed", "wheel", "public"}


def test_the_order_follows_the_rule_not_the_size(ev):
    ranked = ranked_hypotheses(stored_inputs(ev))
    scores = list(ranked["score"])
    assert scores == sorted(scores, reverse=True)
    assert list(ranked["rank"]) == list(range(1, len(ranked) + 1))
    fused = ranked[ranked["hypothesis"].str.startswith("the fused one-shot push")].iloc[0]
    # it could explain all of the removed time, yet the record and the wheels contradict it: it is not first
    assert fused["of_removed"] == "up to 100%" and fused["rank"] > 1
    assert "wheel:" in fused["against"] and "seed:" in fused["against"]


def test_the_page_shows_for_and_against_and_what_decides_the_top_two(ev):
    table = ch04.hypotheses(ev).frame
    assert {"for", "against", "evidence weight"} <= set(table.columns)
    assert (table["for"].str.len() > 0).all()
    text = ch04.hypotheses_order(ev)
    top = ranked_hypotheses(stored_inputs(ev)).iloc[:2]
    assert ORDER_RULE in text and deciding_between_top_two(ranked_hypotheses(stored_inputs(ev))) in text
    for hypothesis in top["hypothesis"]:
        assert hypothesis in text


def test_the_cross_numa_box_is_compared_at_the_verify_sizes_not_at_12_kib(ev):
    """#68 item 3: the PCIe-IPC docstring's cross-NUMA NCCL (205.1 us at 12 KiB) is read at the case study's verify
    sizes (log-log between its three sizes); there it is several times the case study's per-call time, so it counts
    against 'NCCL itself got faster', not for it."""
    from verifylab.model.case.cycle import cycle_account
    from verifylab.model.case.hypotheses import _cross_numa_nccl
    from verifylab.model.case.speculation import inputs
    from verifylab.vocab import KIMI_K2_HIDDEN

    a = cycle_account(stored_inputs(ev))
    sizes = (min(a.draft_tokens) * KIMI_K2_HIDDEN * 2.0, max(a.draft_tokens) * KIMI_K2_HIDDEN * 2.0)
    at_verify, rows = _cross_numa_nccl(stored_inputs(ev), sizes)
    assert rows == "pub-60, pub-61, pub-62"
    _, high, _ = inputs(stored_inputs(ev)).curves.reported_allreduce
    assert at_verify.low > 2 * high  # the reading the page gives
    nccl = (
        ranked_hypotheses(stored_inputs(ev))
        .set_index("hypothesis")
        .loc["NCCL itself got faster with the new stack (transport, protocol, topology, version)"]
    )
    assert "cross-NUMA" in nccl["against"] and "cross-NUMA" not in nccl["for"]
    assert f"{at_verify.low:.0f}-{at_verify.high:.0f} us" in nccl["against"]
