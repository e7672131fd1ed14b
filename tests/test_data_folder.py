"""A command run outside the checkout (the default ``--data-dir data`` is not there) or pointed at a folder that is
not a verifylab data folder says so in one line, naming what to give, before it probes, computes or reads anything.
The owner's `box --gpus N` probed the GPUs for minutes, stored the probe in a new ``data/runs`` where it was run, and
then failed on a missing audit ("SGLang 0.5.22: no audited flags for it"); the run store's commands said "no run ...
in data/runs"."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

ROOT = Path(__file__).resolve().parents[1]
QWEN = str(ROOT / "examples" / "configs" / "qwen3-30b-a3b")
COMMANDS = {
    "box live": ["box", "--gpus", "2", "--decode-tok-s", "90", "--config", QWEN],
    "box --probe": ["box", "--probe", "20261202-203301-box-probe", "--config", QWEN],
    "box --plan": ["box", "--plan", "--config", QWEN, "--gpu", "h200", "--tp", "1", "--decode-tok-s", "90"],
    "model speculation": ["model", "speculation", "--config", QWEN, "--gpu", "h200", "--accept", "2.4"],
    "model whatif": ["model", "whatif"],
    "model reconcile": ["model", "reconcile"],
    "runs list": ["runs", "list"],
    "runs show": ["runs", "show", "20261202-203301-box-probe"],
    "runs migrate": ["runs", "migrate"],
    "comm verdict": ["comm", "verdict", "20261202-203301-box-probe"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_outside_the_checkout_the_data_folder_is_named_before_anything_runs(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, COMMANDS[command])
    assert result.exit_code == 2, result.output
    assert "--data-dir data: no such folder" in result.output and "give --data-dir" in result.output
    assert list(tmp_path.iterdir()) == []  # no probe stored, no data folder made where it was run


@pytest.mark.parametrize("command", ["box --probe", "model speculation"])
def test_a_folder_that_is_not_a_data_folder_is_named(tmp_path, command):
    runs_only = tmp_path / "d"
    shutil.copytree(
        ROOT / "data" / "runs" / "20261202-203301-box-probe", runs_only / "runs" / "20261202-203301-box-probe"
    )
    result = CliRunner().invoke(app, [*COMMANDS[command], "--data-dir", str(runs_only)])
    assert result.exit_code == 2, result.output
    assert "not a verifylab data folder (no reference/ in it)" in result.output
    file = tmp_path / "f.txt"
    file.write_text("x\n")
    result = CliRunner().invoke(app, [*COMMANDS[command], "--data-dir", str(file)])
    assert result.exit_code == 2 and "a file, not a folder" in result.output, result.output
