"""#72: what the engine reads, from the one-GPU runs — attention's growth with context per backend and mode, and the
experts a verify pass reads — each beside the prediction its run stores; the chapter's prose quotes the table."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from verifylab.analysis.engine_reads import attention_view, attention_words, experts_view, experts_words
from verifylab.model.fits.engine_reads import ExpertShape, attention_growth, context_cells, expert_reads
from verifylab.model.inputs.stored import stored_runs
from verifylab.report.tables import Table, cell_text
from verifylab.sources import MeasuredRuns
from verifylab.store.evidence import Evidence

ROOT = Path(__file__).resolve().parents[1]
PREDICTION = pd.DataFrame(
    {
        "shape": ["mla", "mla"],
        "mode": ["plain", "eagle3"],
        "once_per_pass_us_per_1k": [3.0, 3.5],
        "once_per_token_us_per_1k": [3.0, 12.0],
    }
)


def _cells(step_at: dict[int, float], cycle_at: dict[int, float], streams: int = 1) -> pd.DataFrame:
    rows = []
    for mode, times in (("plain", step_at), ("eagle3", cycle_at)):
        for context, ms in times.items():
            rows.append(
                {"shape": "mla", "backend": "triton", "mode": mode, "context": context, "streams": streams,
                 "kv_pool_tokens": 1_000_000, "verify_tokens": 4 if mode == "eagle3" else 1,
                 "step_ms": ms if mode == "plain" else None, "cycle_ms": ms if mode == "eagle3" else None}
            )  # fmt: skip
    return pd.DataFrame(rows)


def _runs(cells: pd.DataFrame) -> MeasuredRuns:
    return MeasuredRuns.of_frames({"r1": {"context_cells": cells, "context_prediction": PREDICTION}})


def test_growth_per_1k_tokens_is_read_between_the_two_longest_contexts_both_modes_measured():
    # plain: +1 ms over 16k tokens; cycle: +8 ms over the same 16k; the cycle alone also measured at 64k
    runs = _runs(_cells({2048: 1.0, 16384: 2.0, 32768: 3.0}, {16384: 10.0, 32768: 18.0, 65536: 50.0}))
    row = attention_growth(stored_runs(runs)).iloc[0]
    assert (row["context_low"], row["context_high"]) == (16384, 32768)
    assert row["plain_us_per_1k"] == pytest.approx(1000 / 16.384)
    assert row["cycle_us_per_1k"] == pytest.approx(8000 / 16.384)
    assert row["cycle_per_verified_token_us_per_1k"] == pytest.approx(2000 / 16.384)
    assert row["cycle_over_plain"] == pytest.approx(8.0)
    assert row["predicted_eagle3_once_per_pass_us_per_1k"] == 3.5


def test_a_step_that_barely_grows_is_host_bound_and_no_ratio_is_drawn_from_it():
    runs = _runs(_cells({16384: 2.0, 32768: 2.1}, {16384: 10.0, 32768: 18.0}))
    growth = attention_growth(stored_runs(runs)).iloc[0]
    assert not growth["plain_resolved"] and math.isnan(growth["cycle_over_plain"])
    view = attention_view(runs).iloc[0]
    assert view["plain_step_us"] == "host-bound"
    assert view["measured_over_model"] == pytest.approx(growth["cycle_us_per_1k"] / 3.5)


def test_growth_is_per_stream():
    one = attention_growth(
        stored_runs(_runs(_cells({16384: 2.0, 32768: 3.0}, {16384: 10, 32768: 18}, streams=1)))
    ).iloc[0]
    four = attention_growth(
        stored_runs(_runs(_cells({16384: 2.0, 32768: 3.0}, {16384: 10, 32768: 18}, streams=4)))
    ).iloc[0]
    assert four["cycle_us_per_1k"] == pytest.approx(one["cycle_us_per_1k"] / 4)


def _expert_runs(verify_experts: int, plain: dict[int, int]) -> MeasuredRuns:
    counts = [
        {"mode": "plain", "streams": c, "forward_pass": p, "layer": 0, "tokens": c, "distinct_tokens": c,
         "distinct_experts": e} for p, (c, e) in enumerate(plain.items())
    ] + [{"mode": "eagle3_verify", "streams": 8, "forward_pass": 99, "layer": 0, "tokens": 32,
          "distinct_tokens": 18, "distinct_experts": verify_experts}]  # fmt: skip
    chains = pd.DataFrame(
        {"streams": [8] * 8, "forward_pass": [99] * 8, "stream": range(8), "chain_ids": ["[1, 2, 3, 3]"] * 8,
         "distinct_ids": [3] * 8}
    )  # fmt: skip
    prediction = pd.DataFrame(
        {"mode": ["eagle3 verify"] * 2, "streams": [8, 8], "tokens": [32, 32], "overlap": ["independent (0)",
         "shared (1)"], "overlap_value": [0.0, 1.0], "distinct_experts": [111.3, 51.5]}
    )  # fmt: skip
    frames = {"e1": {"expert_counts": pd.DataFrame(counts), "verify_chains": chains, "expert_prediction": prediction}}
    config = {"target": {"num_experts": 128, "num_experts_per_tok": 8}}
    return MeasuredRuns.of_frames(frames, parameters={"config": config})


def test_a_verify_is_set_against_independent_tokens_and_one_draw_per_chain():
    shape = ExpertShape(128, 8)
    runs = _expert_runs(round(shape.union_of(20)), {8: 52, 32: 110})
    row = expert_reads(stored_runs(runs)).iloc[0]
    assert (row["independent_experts"], row["shared_experts"]) == (110, 52)
    assert row["verify_over_independent"] == pytest.approx(row["verify_experts"] / 110)
    # 20 independent draws from 8 chains of 4 tokens: 1 - (20 / 8 - 1) / 3 = 0.5
    assert row["equivalent_overlap"] == pytest.approx(0.5, abs=0.02)
    assert (row["predicted_overlap_0"], row["predicted_overlap_1"]) == (111.3, 51.5)
    assert row["ids_per_chain"] == 3


def test_every_expert_read_has_no_equivalent_overlap():
    row = expert_reads(stored_runs(_expert_runs(128, {8: 52, 32: 128}))).iloc[0]
    assert math.isnan(row["equivalent_overlap"])


def test_draws_invert_the_union():
    shape = ExpertShape(128, 8)
    assert shape.draws_for(shape.union_of(37.0)) == pytest.approx(37.0)
    assert shape.draws_for(128) == math.inf


def _numbers(text: str) -> list[str]:
    return re.findall(r"(?<![\w-])-?\d[\d,]*(?:\.\d+)?", text)  # a sign is part of the value quoted


@pytest.mark.parametrize("which", ["attention", "experts"])
def test_the_prose_quotes_the_tables_cells_on_the_stored_runs(which):
    """Every decimal of a sentence is a cell of the exhibit beside it, or a value the text derives from those cells
    and names (a growth summed over the streams, the pool's size, a mean): one quantity, one value on the page."""
    runs = Evidence(ROOT / "data").measured
    if which == "attention":
        view, words = attention_view(runs), attention_words(runs)
        growth, cells = attention_growth(stored_runs(runs)), context_cells(stored_runs(runs))
        mla = growth[(growth["shape"] == "mla") & growth["cycle_us_per_1k"].notna()]
        derived = {
            cell_text("verify_cycle_us", g * c) for g, c in zip(mla["cycle_us_per_1k"], mla["streams"], strict=True)
        }
        pools = cells["kv_pool_tokens"]
        derived |= {f"{pools.min() / 1e6:.1f}", f"{pools.max() / 1e6:.1f}",
                    f"{(cells['context'] * cells['streams']).max() / 1e6:.2f}", "0.5"}  # fmt: skip
    else:
        view, words = experts_view(runs), experts_words(runs)
        derived = {cell_text("ids_per_chain", expert_reads(stored_runs(runs))["ids_per_chain"].mean())}
    assert not view.empty, "the stored engine-reads runs are read"
    shown = {str(v) for v in Table(view).cells().to_numpy().ravel()}
    quoted = [n for n in _numbers(words) if "." in n]
    assert quoted
    assert {n for n in quoted if n not in shown} <= derived


def test_the_stored_predictions_are_the_committed_files():
    """The prediction a run stores is the file committed before it ran, unchanged."""
    runs = Evidence(ROOT / "data").measured
    here = ROOT / "benchmarks" / "engine_reads"
    for table, file in (
        ("context_prediction", "predicted-context.csv"),
        ("expert_prediction", "predicted-experts.csv"),
    ):
        stored = runs.runs_with_table(table)
        assert stored, table
        committed = pd.read_csv(here / file)
        for run_id in stored:
            pd.testing.assert_frame_equal(
                runs.read_table(run_id, table).reset_index(drop=True), committed, check_dtype=False
            )
