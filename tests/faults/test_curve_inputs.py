"""Issue 41 class 2 at the curve boundary (``model.comm_pass``): every row of a reader's curve is a point or the
file is refused naming the row; an impossible input is never priced (`model pass`, `model whatif`, `box`)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

HEADER = "path,impl,tokens,us\n"


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        ("shm,nccl,1,inf\n", "line 2: us = inf"),
        ("shm,nccl,1,30\nshm,nccl,16,-4\n", "line 3: us = -4"),
        ("shm,nccl,1,0.03\n", "in milliseconds"),
        ("shm,nccl,1,30\nshm,nccl,16,\n", "line 3: tokens and us must both be numbers"),
        ("shm,oneshot,1,30\n", "line 2: impl 'oneshot'"),
        ("shm,nccl,0,30\n", "line 2: message of 0"),
    ],
)
@pytest.mark.parametrize("command", ["pass", "whatif"])
def test_a_curve_row_that_cannot_be_a_latency_refuses_the_file(tmp_path, repo_root, monkeypatch, rows, words, command):
    monkeypatch.chdir(repo_root)
    curve = tmp_path / "curve.csv"
    curve.write_text(HEADER + rows)
    args = ["--compute-ms", "8", "--tokens", "16", "--path", "shm", "--norm-us", "3"] if command == "pass" else []
    result = CliRunner().invoke(app, ["model", command, "--latency", str(curve), *args])
    assert result.exit_code == 1 and words in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_path_the_curve_lacks_and_an_infinite_input_are_refused(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    curve = tmp_path / "curve.csv"
    curve.write_text(HEADER + "shm,nccl,1,30\nshm,nccl,16,40\n")
    base = ["model", "pass", "--tokens", "16", "--latency", str(curve), "--norm-us", "3", "--json"]
    lacks = CliRunner().invoke(app, [*base, "--compute-ms", "8", "--path", "p2p"])
    assert lacks.exit_code == 1 and "its paths: shm" in lacks.output
    infinite = CliRunner().invoke(app, [*base, "--compute-ms", "inf", "--path", "shm"])
    assert infinite.exit_code == 1 and "--compute-ms inf" in infinite.output
    good = CliRunner().invoke(app, [*base, "--compute-ms", "8", "--path", "shm"])
    assert good.exit_code == 0 and json.loads(good.output)["variants"][1]["pass_ms"] > 8
