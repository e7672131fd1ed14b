"""#81: the launch line from the answer, through the one builder: remote code where the model's config names it, the
attention backend and KV dtype the answer priced, the running cap with CUDA graphs up to it, each flag's reason."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.launch import SglangLaunch, build_command
from verifylab.model.answers.case_answers import answer_backend
from verifylab.publish.decision import launch_section
from verifylab.store.evidence import Evidence

ROOT = Path(__file__).resolve().parents[1]
KIMI = ROOT / "examples" / "configs" / "kimi-k2.5-int4" / "config.json"


def _plan(config: Path, *extra: str) -> str:
    argv = ["box", "--plan", "--config", str(config), "--gpu", "rtx-pro-6000", "--tp", "8", "--regime",
            "healthy-p2p", "--context", "2048", "--load", "4", "--slo-tpot-ms", "200", "--data-dir",
            str(ROOT / "data"), *extra]  # fmt: skip
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def _launch_line(output: str) -> str:
    return output.split("launch the choice: ", 1)[1].split(" modelled:", 1)[0]


def test_the_kimi_plan_launches_with_remote_code_its_backend_and_kv_dtype():
    line = _launch_line(_plan(KIMI, "--attention-backend", "flashinfer"))
    for flag in ("--trust-remote-code", "--attention-backend flashinfer", "--kv-cache-dtype fp8_e4m3"):
        assert flag in line, flag
    assert "--cuda-graph-max-bs-decode 4" in line and "--max-running-requests 4" in line
    assert "--attention-backend triton" in _launch_line(_plan(KIMI))


def test_a_config_without_auto_map_gets_no_remote_code_flag(tmp_path):
    config = json.loads(KIMI.read_text())
    del config["auto_map"]
    plain = tmp_path / "config.json"
    plain.write_text(json.dumps(config))
    line = _launch_line(_plan(plain, "--attention-backend", "flashinfer"))
    assert "--trust-remote-code" not in line and "--attention-backend flashinfer" in line


def test_the_builder_spells_the_graph_cap_as_each_version_does_and_says_why():
    ev = Evidence(ROOT / "data")
    launch = SglangLaunch(
        trust_remote_code=True, max_running_requests=8, cuda_graph_max_bs=8, kv_cache_dtype="fp8_e4m3"
    )
    new, old = build_command(launch, ev.launch_target("0.5.22")), build_command(launch, ev.launch_target("0.5.10"))
    assert new.value_of("--cuda-graph-max-bs-decode") == "8" and "--cuda-graph-max-bs" not in new.args
    assert old.value_of("--cuda-graph-max-bs") == "8"
    assert [flag for flag, _ in new.reasons()] == [
        "--trust-remote-code", "--kv-cache-dtype", "--enforce-disable-flashinfer-allreduce-fusion",
        "--max-running-requests", "--cuda-graph-max-bs-decode",
    ]  # fmt: skip


def test_the_decision_pages_launch_lines_name_what_its_answers_priced():
    ev = Evidence(ROOT / "data")
    section = launch_section(ev)
    assert section.count("--trust-remote-code") >= 2 and "--kv-cache-dtype fp8_e4m3" in section
    assert f"--attention-backend {answer_backend(ev)}" in section
