"""#77's named cases of silently wrong answers, each refused or handled: --gpu in any spelling reaches the public
evidence, a probe's plan at another --tp is refused, and a benchmark never writes into (nor marks as a test double) a
stored run it did not make."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.bench.runner import open_recorder
from verifylab.cli import app
from verifylab.errors import BenchmarkError

ROOT = Path(__file__).resolve().parents[1]
KIMI = ROOT / "examples" / "configs" / "kimi-k2.5-int4"
PROBE = "20261201-092338-2xh200-probe-p2p"


def _run(*argv: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*argv, "--data-dir", str(ROOT / "data")])
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize("spelling", ["RTX-PRO-6000", "rtx_pro_6000", "Rtx Pro 6000"])
def test_the_gpu_in_any_spelling_reaches_the_public_evidence(spelling):
    plan = ["box", "--plan", "--config", str(KIMI), "--tp", "8", "--regime", "healthy-p2p", "--context", "2048"]
    code, given = _run(*plan, "--gpu", spelling, "--load", "4", "--slo-tpot-ms", "200")
    _, keyed = _run(*plan, "--gpu", "rtx-pro-6000", "--load", "4", "--slo-tpot-ms", "200")
    assert code == 0 and "evidence: public" in given and given == keyed


def test_a_probes_plan_at_another_tp_is_refused_naming_both():
    code, out = _run("box", "--plan", "--probe", PROBE, "--config", str(ROOT / "examples/configs/qwen3-30b-a3b"),
                     "--tp", "4")  # fmt: skip
    assert code != 0 and "--tp 4" in out and "TP 2" in out
    code, _ = _run("box", "--plan", "--probe", PROBE, "--config", str(ROOT / "examples/configs/qwen3-30b-a3b"))
    assert code == 0


def test_a_benchmark_never_writes_into_a_run_it_did_not_make(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "data" / "runs" / PROBE, runs / PROBE)
    before = (runs / PROBE / "manifest.json").read_bytes()
    label = json.loads(before)["label"]
    with pytest.raises(BenchmarkError, match=PROBE):
        open_recorder(tmp_path, PROBE, label, {})
    assert (runs / PROBE / "manifest.json").read_bytes() == before
