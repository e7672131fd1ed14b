"""Speculation under load: the grid's servers (what each is asked for) and the experiment against the test double,
started through the real launcher path, with the accept length SGLang is made to hold checked end to end."""

from __future__ import annotations

import sys

import pandas as pd
import pytest
from pydantic import ValidationError

from tests.test_bench import free_port
from verifylab.bench.runner import RunPlace
from verifylab.bench.speculation import POINTS_TABLE, run_speculation_grid
from verifylab.bench.speculation_grid import SIMULATE_VAR, TOKEN_MODE_VAR, Drafter, SpecPoint, SpeculationGrid
from verifylab.errors import ParameterError
from verifylab.server.launch import launcher_help
from verifylab.server.variants import BaseConfig, variant_command
from verifylab.store.runs import RunStore

TEST_LAUNCHER = [sys.executable, "-m", "verifylab.testing.server"]


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_grid_points_and_what_each_server_is_asked_for():
    grid = SpeculationGrid(accept_lengths=[1.5, 3.0], draft_tokens=[2, 4])
    names = [p.name for p in grid.points()]
    # a 2-token chain cannot reach 3 accepted tokens: skipped, never asked for
    assert names == [
        "plain",
        "eagle3_d2_a1p50",
        "eagle3_d4_a1p50",
        "eagle3_d4_a3p00",
        "ngram_d2_a1p50",
        "ngram_d4_a1p50",
        "ngram_d4_a3p00",
    ]
    help_text = launcher_help(TEST_LAUNCHER)
    cfg = BaseConfig(model_path="m", draft_model_path="d", launcher=TEST_LAUNCHER)
    ngram = SpecPoint(Drafter.NGRAM, 4, 3.0).variant()
    args = variant_command(cfg, ngram, help_text).args

    def value(flag: str) -> str:
        return args[args.index(flag) + 1]

    assert value("--speculative-algorithm") == "NGRAM" and value("--speculative-num-draft-tokens") == "4"
    assert value("--speculative-num-steps") == "3" and value("--speculative-ngram-max-bfs-breadth") == "1"
    assert ngram.env == {SIMULATE_VAR: "3", TOKEN_MODE_VAR: "fixed"}
    eagle = variant_command(cfg, SpecPoint(Drafter.EAGLE3, 2, 1.5).variant(), help_text).args
    assert "--speculative-ngram-max-bfs-breadth" not in eagle
    assert eagle[eagle.index("--speculative-num-steps") + 1] == "1"
    plain = SpecPoint().variant()
    assert plain.speculative is None and plain.env == {}


def test_a_spread_forced_grid_samples_and_accepts_the_drafts_own_tokens():
    """Experts spread only where the streams diverge: sampled requests and the draft's own tokens accepted."""
    greedy = SpeculationGrid(drafters=["eagle3"], accept_lengths=[2.0])
    assert not greedy.spreads_experts
    assert not SpeculationGrid(drafters=["eagle3"], accept_lengths=[2.0], temperature=1.0).spreads_experts
    spread = SpeculationGrid(drafters=["eagle3"], accept_lengths=[2.0], temperature=1.0, token_mode="real-draft-token")
    assert spread.spreads_experts
    eagle = next(p for p in spread.points() if p.drafter is not None)
    assert eagle.variant().env == {SIMULATE_VAR: "2", TOKEN_MODE_VAR: "real-draft-token"}
    with pytest.raises(ValidationError):
        SpeculationGrid(temperature=3.0)
    with pytest.raises(ValidationError):
        SpeculationGrid(token_mode="random")


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"accept_lengths": [0.5]}, "impossible"),
        ({"accept_lengths": [5.0], "draft_tokens": [4]}, "exceeds the longest chain"),
        ({"draft_tokens": [1]}, "2 to 64"),
        ({"drafters": ["medusa"]}, "drafters"),
        ({"concurrency": [0]}, "concurrency"),
    ],
)
def test_a_grid_that_cannot_be_run_is_refused_naming_what(values, named):
    from verifylab.chapters.params import Benchmarks

    with pytest.raises(ParameterError, match=named):
        Benchmarks.validated(speculation=values)


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_grid_against_the_double_holds_each_accept_length_and_resumes(tmp_path):
    grid = SpeculationGrid(accept_lengths=[1.5, 3.0], concurrency=[1, 2], tokens=12, requests_per_cell=2)
    cfg = BaseConfig(
        model_path="m", draft_model_path="d", port=free_port(), launcher=TEST_LAUNCHER, extra_args=["--step-ms", "5"]
    )
    said: list[str] = []
    points = run_speculation_grid(cfg, grid, RunPlace(tmp_path, "spec", "test double (not data)"), progress=said.append)
    assert len(points) == 5 and not points.failure.any() and points.active.all()
    store = RunStore(tmp_path / "runs")
    cells = store.read_table("spec", "sweep_cells").merge(store.read_table("spec", POINTS_TABLE), on="variant")
    assert len(cells) == 10
    spec = cells[cells.drafter != "none"]
    # every response's verify count gives back the accept length the server was made to hold, and so does its own
    assert spec.accept_length.to_numpy() == pytest.approx(spec.accept_target.to_numpy(), abs=0.1)
    stored = store.read_table("spec", POINTS_TABLE).set_index("variant")
    assert stored.loc["ngram_d4_a3p00", "server_accept_length"] == pytest.approx(3.0, abs=0.1)
    assert pd.isna(stored.loc["plain", "server_accept_length"]) and stored.loc["plain", "draft_tokens"] == 1
    assert any("eagle3_d4_a1p50: measured" in line for line in said)
    # resumed: every cell is stored, so no server starts again
    said.clear()
    again = run_speculation_grid(cfg, grid, RunPlace(tmp_path, "spec", "test double (not data)"), progress=said.append)
    assert len(again) == 5 and not again.failure.any()
    assert len(said) == 5 and all(line.endswith("stored, skipped") for line in said)
    assert store.manifest("spec").status == "complete"


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_a_server_that_cannot_start_leaves_the_run_partial_and_is_tried_again(tmp_path):
    grid = SpeculationGrid(drafters=["eagle3"], accept_lengths=[2.0], concurrency=[1], tokens=8, requests_per_cell=1)
    cfg = BaseConfig(model_path="m", port=free_port(), launcher=TEST_LAUNCHER, extra_args=["--step-ms", "5"])
    points = run_speculation_grid(
        cfg, grid, RunPlace(tmp_path, "spec", "test double (not data)")
    )  # no draft model given
    by_name = points.set_index("variant")
    assert "draft_model_path" in by_name.loc["eagle3_d4_a2p00", "failure"] and not by_name.loc["plain", "failure"]
    store = RunStore(tmp_path / "runs")
    assert store.manifest("spec").status == "partial"
    said: list[str] = []
    run_speculation_grid(cfg, grid, RunPlace(tmp_path, "spec", "test double (not data)"), progress=said.append)
    assert any("plain: stored, skipped" in line for line in said)
    assert any("eagle3_d4_a2p00: starting" in line for line in said)  # the failed server is tried again
