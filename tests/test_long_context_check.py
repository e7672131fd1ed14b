"""#81: the decision page's long-context check runs as printed (with --dry-run it prints prompts of the stated context
and stream counts the KV pool holds), and a real `--verify` sends prompts of the stated length: the stand-in server
counts the token ids it receives (its runs are test doubles, never data)."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from tests.test_bench import free_port
from verifylab.bench.prompts import PREFIX_TOKENS, context_prompts
from verifylab.cli import app
from verifylab.model.answers.evidence_ladder import settle_command
from verifylab.store.evidence import Evidence

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = [sys.executable, "-m", "verifylab.testing.server"]


def _settings(tmp_path: Path, port: int) -> Path:
    file = tmp_path / "verify.yaml"
    launcher = ", ".join(f'"{a}"' for a in LAUNCHER)
    file.write_text(
        "base:\n  model_path: m\n  draft_model_path: d\n  tp_size: 8\n"
        f"  port: {port}\n  launcher: [{launcher}]\n  extra_args: [--step-ms, '2']\n"
        "output_tokens: 8\nhold_accept: true\nlabel: test double (not data)\n"
    )
    return file


def test_synthetic_prompts_have_the_stated_length_and_prefixes_of_their_own():
    prompts = context_prompts(12, 2048)
    assert all(len(p.input_ids) == 2048 for p in prompts)
    assert len({p.input_ids[:PREFIX_TOKENS] for p in prompts}) == 12


def test_the_pages_long_context_check_runs_as_printed_with_dry_run(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the page prints it to run from the checkout (its config path is the checkout's)
    printed = re.search(r"`(verifylab box [^`]+)`", settle_command(65536)).group(1)
    argv = shlex.split(printed.replace("FILE", str(_settings(tmp_path, free_port()))))[1:]
    result = CliRunner().invoke(app, [*argv, "--dry-run", "--data-dir", str(ROOT / "data")])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "65,536-token prompts" in out
    cap = int(re.search(r"the KV pool holds (\d+) distinct streams", out).group(1))
    swept = [int(s) for s in re.search(r"each swept at ([\d, ]+) streams", out).group(1).split(",")]
    assert cap >= 1 and max(swept) <= cap


def test_verify_sends_prompts_of_the_stated_context(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(ROOT / "data", data)  # the plan prices from the stored runs; the check's run lands in the copy
    context = 4096
    argv = ["box", "--plan", "--config", str(ROOT / "examples/configs/kimi-k2.5-int4"), "--gpu", "rtx-pro-6000",
            "--tp", "8", "--regime", "healthy-p2p", "--context", str(context), "--load", "2", "--slo-tpot-ms", "500",
            "--verify", str(_settings(tmp_path, free_port())), "--run-id", "long-context", "--budget-minutes", "120",
            "--data-dir", str(data)]  # fmt: skip
    result = CliRunner().invoke(app, argv)
    assert "measuring into run long-context" in result.output, result.output
    runs = Evidence(data).measured
    tables = [t for t in runs.run("long-context").tables if t.startswith("sweep-")]
    assert tables
    sent = pd.concat([runs.read_table("long-context", t) for t in tables])["prompt_tokens"]
    assert len(sent) > 0 and (abs(sent / context - 1) <= 0.01).all(), sent.describe()
