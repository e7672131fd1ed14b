"""A box with a speculation grid of its own is priced from that grid: its overheads and its fitted routing overlap
(the nearest evidence), not the first stored grid's, which every other box shares. The loop's stored check (run
20261203-103429-h200-box-verify: 1 x H200, TP 1, the Qwen3-shaped MoE with random weights, experts spread) measured
that box after its grid was fitted: the plan must bracket it within a few percent, where the shared grid's overheads
priced EAGLE-3 at about half of what it measured."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from verifylab.cli import app

DATA = Path(__file__).resolve().parents[1] / "data"
CHECK = "20261203-103429-h200-box-verify"
OWN_GRID = "20261203-102200-h200-spec-load-spread"
SHARED_GRID = "20261202-183005-h200-spec-load"
PLAN = ["--gpu", "h200", "--load", "16", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "10", "--accept", "2.6"]


def _check_configs(tmp_path: Path) -> tuple[str, str]:
    """The served model's and the draft's config.json as the check's manifest records them, each in a folder."""
    parameters = json.loads((DATA / "runs" / CHECK / "manifest.json").read_text())["parameters"]
    paths = []
    for name in ("served_config", "draft_config"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(parameters[name]))
        paths.append(str(folder))
    return paths[0], paths[1]


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"VERIFYLAB_CACHE": "off", "COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.output


def _rows(output: str) -> dict[str, tuple[str, float, float]]:
    """The plan's table: role -> its configuration and tok/s range."""
    found = {}
    row = r"│ (choice|runner-up|plain) +│ ([^│]+?) +│[^│]+│ (\d+)-(\d+) +│"  # role, configuration, goodput, tok/s
    for role, config, low, high in re.findall(row, output):
        found[role] = (config, float(low), float(high))
    return found


def test_a_plan_for_a_box_with_its_own_grid_is_priced_on_it_and_brackets_the_check(tmp_path):
    target, draft = _check_configs(tmp_path)
    output = _invoke("box", "--plan", "--config", target, "--draft-config", draft, *PLAN)
    words = " ".join(output.split())
    assert f"drafting overhead: per speculative cycle, fitted on this box's own grid, run {OWN_GRID}" in words
    assert "routing overlap: 1.00 of a chain's tokens share experts" in words  # the grid's fitted overlap
    measured = pd.read_parquet(DATA / "runs" / CHECK / "box_verify.parquet")
    at_load = measured[measured["streams"] == 16].set_index("role")
    rows = _rows(output)
    for role, name in (("choice", "chosen"), ("runner-up", "runner-up"), ("plain", "plain")):
        config, low, high = rows[role]
        assert config == at_load.loc[name, "configuration"]  # the configuration the check measured in that role
        value = float(at_load.loc[name, "measured_tokens_per_s"])
        miss = max(low - value, value - high, 0.0) / value
        assert miss < 0.05, (role, low, high, value)  # the shared grid's plan missed EAGLE-3's by about half


def test_a_stated_overlap_wins_and_another_box_keeps_the_shared_grid(tmp_path):
    target, draft = _check_configs(tmp_path)
    stated = " ".join(
        _invoke("box", "--plan", "--config", target, "--draft-config", draft, *PLAN, "--overlap", "0").split()
    )
    assert "routing overlap: 0.00" in stated and f"own grid, run {OWN_GRID}" in stated
    other_draft = " ".join(_invoke("box", "--plan", "--config", target, *PLAN).split())  # the usual one-layer draft
    assert f"drafting overhead: per speculative cycle, fitted on run {SHARED_GRID}" in other_draft
    assert "routing overlap: 0.00" in other_draft


def test_model_speculation_prices_the_same_box_on_the_same_grid(tmp_path):
    """One rule for the commands: `model speculation` on the box prices it on its own grid and overlap too."""
    target, draft = _check_configs(tmp_path)
    args = ["--config", target, "--draft-config", draft, "--gpu", "h200", "--tp", "1", "--accept", "3.29"]
    words = " ".join(_invoke("model", "speculation", *args, "--draft-tokens", "8").split())
    assert f"fitted on this box's own grid, run {OWN_GRID}" in words and "routing_overlap: 1.00" in words


def test_every_other_box_shares_the_grid_the_public_curves_held_out_agree_with(monkeypatch):
    """Why the first grid (random weights fed identical tokens: routing collapsed) prices every box without a grid of
    its own, and not the spread grid: with the spread grid's drafting overhead every public curve of a trained model
    on another box, held out or a family check, is predicted worse, and one that never pays is predicted to pay."""
    from verifylab.model.fits import overlap
    from verifylab.model.fits.grid import first_grid_fit
    from verifylab.model.inputs.model_costs import Routing
    from verifylab.model.inputs.stored import stored_inputs, stored_runs
    from verifylab.store.evidence import Evidence

    shared = overlap.check_summary(overlap.public_check(stored_inputs(Evidence(DATA))))
    spread = first_grid_fit(stored_runs(Evidence(DATA).measured), Routing.UNIFORM)
    assert spread is not None and spread.run_id == OWN_GRID
    monkeypatch.setattr(overlap, "measured_overheads", lambda runs: spread.overheads)
    other = overlap.check_summary(overlap.public_check(stored_inputs(Evidence(DATA))))
    for role in ("held out", "family check"):
        mine = shared[shared["role"] == role].set_index("curve")["median_error"]
        theirs = other[other["role"] == role].set_index("curve")["median_error"]
        assert len(mine) and (mine < theirs).all(), (role, mine.to_dict(), theirs.to_dict())
    never = shared[shared["reported"] == "never pays"]["curve"]
    assert len(never) and (shared.set_index("curve").loc[never, "predicted_middle"] == "never pays").all()
    assert (other.set_index("curve").loc[never, "predicted_middle"] != "never pays").all()


def test_the_loops_refit_and_the_plan_take_the_same_grid_of_the_checked_box(tmp_path):
    """One rule for "the box's own grid": the loop refits the check on the grid its box's plans are priced on."""
    from verifylab.model.fits.grid import check_grid_fit, own_grid_fit
    from verifylab.model.inputs.configs import read_config
    from verifylab.model.inputs.gpus import gpu_named
    from verifylab.model.inputs.model_costs import Routing
    from verifylab.model.inputs.stored import stored_runs
    from verifylab.model.pricing.pricer import Box
    from verifylab.store.evidence import Evidence

    runs = stored_runs(Evidence(DATA).measured)
    target, draft = (read_config(Path(p)) for p in _check_configs(tmp_path))
    box = Box(target, gpu_named("h200", runs.ceilings), tp=1, draft=draft, routing=Routing.UNIFORM)
    refit, priced = check_grid_fit(runs, CHECK), own_grid_fit(runs, box)
    assert refit is not None and priced is not None and refit.run_id == priced.run_id == OWN_GRID
