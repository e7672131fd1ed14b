"""The model's inputs are one record (``model/inputs/stored.py``), each part read on its first use; a part whose stored
tables do not hold what its reader needs (here a trace without its communication column) raises where it is used: an
answer that needs none of it is still given, and one that does names the part, its tables and what was missing,
without a traceback."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

ROOT = Path(__file__).resolve().parents[2]
TRACED = "20261130-074200-2xh200-comm"  # a campaign run whose verify_pass_trace feeds the in-pass fit


@pytest.fixture
def data_without_comm(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("VERIFYLAB_CACHE", "off")
    data = tmp_path / "data"
    shutil.copytree(ROOT / "data", data)
    path = data / "runs" / TRACED / "verify_pass_trace.csv"
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    drop = rows[0].index("comm_us")
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows([c for i, c in enumerate(r) if i != drop] for r in rows)
    return data


def test_a_plan_that_needs_no_trace_is_given_and_one_that_does_names_the_part(data_without_comm):
    plan = CliRunner().invoke(
        app,
        ["box", "--plan", "--config", str(ROOT / "examples/configs/qwen3-30b-a3b"), "--gpu", "h200", "--tp", "1",
         "--load", "32", "--accept", "2.4", "--decode-tok-s", "90", "--data-dir", str(data_without_comm)],
    )  # fmt: skip
    assert plan.exit_code == 0, plan.output
    matched = CliRunner().invoke(  # a public matrix ran this box: the model's curves are never read (#78)
        app,
        ["model", "speculation", "--config", str(ROOT / "examples/configs/kimi-k2.5-int4"), "--gpu", "rtx-pro-6000",
         "--tp", "8", "--regime", "healthy-p2p", "--data-dir", str(data_without_comm)],
    )  # fmt: skip
    assert matched.exit_code == 0, matched.output
    unfused = CliRunner().invoke(  # no matrix ran 8 x H200: the model prices NCCL there, no fused kernel (#78)
        app,
        ["model", "speculation", "--config", str(ROOT / "examples/configs/kimi-k2.5-int4"), "--gpu", "h200",
         "--tp", "8", "--regime", "healthy-p2p", "--accept", "2", "--data-dir", str(data_without_comm)],
    )  # fmt: skip
    assert unfused.exit_code == 0, unfused.output
    priced = CliRunner().invoke(  # every option, fusion too: the fused kernel's in-pass factor is its trace's
        app, ["model", "whatif", "--data-dir", str(data_without_comm)]
    )
    assert priced.exit_code != 0
    words = " ".join(priced.output.split())
    assert "the in-pass points (tables verify_pass_trace" in words and "comm_us" in words, words
    assert "Traceback" not in priced.output
