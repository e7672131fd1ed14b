"""#69: the owner's loop, trustworthy — one vocabulary and one set of checked inputs for `box` and `model`, honest plans
(ties named, no command where nothing meets the SLO, the loop's own stored error shown) and a `box --verify` that
notices a lying or dying server and never writes into a run it did not create."""

from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.test_bench import free_port
from verifylab.cli import app
from verifylab.cli.box_check import CheckError, print_plan, verify_on_box
from verifylab.errors import ParameterError
from verifylab.launch import FUSION_BACKEND_FLAG, FUSION_OFF_FLAG
from verifylab.model.answers.box_plan import Slo, choose
from verifylab.model.fits.grid import first_grid_fit
from verifylab.model.inputs.model_costs import Routing
from verifylab.model.inputs.stored import stored_runs
from verifylab.span import Span
from verifylab.store.evidence import Evidence

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
KIMI = ROOT / "examples" / "configs" / "kimi-k2.5-int4"
QWEN = ROOT / "examples" / "configs" / "qwen3-30b-a3b"
TEST_LAUNCHER = [sys.executable, "-m", "verifylab.testing.server"]


def _run(args: list[str]):
    return CliRunner().invoke(app, args)


def _plan_args(*extra: str) -> list[str]:
    return ["box", "--plan", "--config", str(KIMI), "--tp", "8", "--data-dir", str(DATA), *extra]


def test_a_kimi_plan_at_tp_8_launches_tp_8_on_the_recommended_collective():
    args = _plan_args(
        "--gpu", "rtx-pro-6000", "--gpus", "8", "--regime", "healthy-p2p", "--accept", "2.4", "--load", "8"
    )
    result = _run(args)
    assert result.exit_code == 0, result.output
    command = " ".join(result.output.split())
    assert "--tp-size 8" in command and "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1" in command


@pytest.mark.parametrize(
    ("config", "tp", "sglang", "load", "launched"),
    [
        (KIMI, "8", "0.5.22", "8", True),  # a public PCIe-IPC curve at 8 ranks prices it, with more goodput
        (KIMI, "8", "0.5.22", "32", False),  # priced, but not 2% more goodput at both ends: NCCL, SGLang's default
        (QWEN, "2", "0.5.22", "8", False),  # no curve prices it at 2 ranks: NCCL, priced and launched
        (KIMI, "8", "0.5.21", "8", False),  # 0.5.21 pins FlashInfer 0.6.18: no PCIe-IPC all-reduce to launch
    ],
)
def test_a_plan_launches_the_all_reduce_it_priced(config, tp, sglang, load, launched):
    """The plan's `all-reduce:` line names the collective its passes were priced on, and the launch line sets SGLang's
    PCIe-IPC switch exactly where that collective is PCIe-IPC (it once priced NCCL and launched PCIe-IPC); where the
    SGLang named has it and a curve prices it, the plan launches it only where it prices more goodput at the load."""
    args = ["box", "--plan", "--config", str(config), "--tp", tp, "--gpu", "rtx-pro-6000", "--regime", "healthy-p2p"]
    result = _run([*args, "--accept", "2.4", "--load", load, "--sglang", sglang, "--data-dir", str(DATA)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    priced = text.split("all-reduce: ", 1)[1].split(" all-reduce,", 1)[0]
    command = text.split("launch the choice: ", 1)[1].split(" --", 1)[0]
    assert priced == ("PCIe-IPC" if launched else "NCCL"), text
    assert ("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1" in command) == launched, command
    assert ("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1: SGLang's PCIe-IPC all-reduce" in text) == launched
    assert ("PCIe-IPC all-reduce not launched" in text) == (not launched and sglang == "0.5.22")


def test_model_speculation_on_pcie_ipc_prices_plain_decoding_as_the_plan_does():
    """One value per question: `box --plan` launches and prices PCIe-IPC at TP 8 with healthy P2P (at 4 streams, where
    it has more goodput than NCCL), and `model speculation --pcie-ipc` at the plan's context and load gives its plain
    decoding the same tok/s; on NCCL (the default) another, and --pcie-ipc where no curve prices it is refused naming
    why."""
    box = ["--config", str(QWEN), "--gpu", "rtx-pro-6000", "--tp", "8", "--regime", "healthy-p2p", "--accept", "2.4"]
    plan = CliRunner().invoke(
        app, ["box", "--plan", *box, "--load", "4", "--data-dir", str(DATA)], env={"COLUMNS": "220"}
    )
    assert plan.exit_code == 0, plan.output
    load = int(re.search(r"at (\d+) streams", plan.output).group(1))
    low, high = map(int, re.search(r"│ plain +│ plain decoding[^│]*│ (\d+)-(\d+)", plan.output).groups())
    asked = ["model", "speculation", *box, "--context", "320", "--streams", str(load), "--json"]
    asked += ["--data-dir", str(DATA)]
    priced = {}
    for extra in ([], ["--pcie-ipc"]):
        result = _run([*asked, *extra])
        assert result.exit_code == 0, result.output
        row = json.loads(result.output)["rows"][0]
        priced[bool(extra)] = (round(row["plain_tokens_per_s_low"]), round(row["plain_tokens_per_s_high"]))
    assert priced[True] == (low, high) != priced[False]  # 320 tokens: the plan's 256 prompt + half of 128 output
    refused = _run(["model", "speculation", *box[:4], "--tp", "4", *box[6:], "--pcie-ipc", "--data-dir", str(DATA)])
    assert refused.exit_code == 2 and "no curve prices SGLang's PCIe-IPC all-reduce at 4 ranks" in refused.output


def test_a_decode_rate_given_is_measured_on_nccl_and_pcie_ipc_keeps_its_saving():
    """`--decode-tok-s` is the owner's plain decoding on the all-reduce SGLang runs unless told, NCCL: priced on
    PCIe-IPC, the model calibrates on NCCL and carries the host overhead over, so one stream decodes faster on the
    cheaper all-reduce (calibrated on PCIe-IPC itself, the saving was absorbed: the same rate as on NCCL); the plan
    for that box and rate at one stream launches PCIe-IPC for it."""
    asked = ["model", "speculation", "--config", str(KIMI), "--gpu", "rtx-pro-6000", "--tp", "8", "--regime",
             "healthy-p2p", "--accept", "2.4", "--decode-tok-s", "40", "--context", "320", "--streams", "1", "--json",
             "--data-dir", str(DATA)]  # fmt: skip
    plain = {}
    for extra in ([], ["--pcie-ipc"]):
        result = _run([*asked, *extra])
        assert result.exit_code == 0, result.output
        row = json.loads(result.output)["rows"][0]
        plain[bool(extra)] = (row["plain_tokens_per_s_low"], row["plain_tokens_per_s_high"])
    assert all(ipc > 1.02 * nccl for ipc, nccl in zip(plain[True], plain[False], strict=True)), plain  # not a rounding
    plan = CliRunner().invoke(  # the same box and rate; 320 tokens: the plan's 256 prompt + half of 128 output
        app, ["box", "--plan", *asked[2:14], "--load", "1", "--data-dir", str(DATA)], env={"COLUMNS": "220"}
    )
    assert plan.exit_code == 0, plan.output
    text = " ".join(plan.output.split())
    assert "chosen over NCCL by goodput at 1 stream" in text and "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1 python" in text
    low, high = map(int, re.search(r"│ plain +│ plain decoding[^│]*│ (\d+)-(\d+)", plan.output).groups())
    assert (low, high) == tuple(round(v) for v in plain[True])  # one value: the plan's plain decoding on PCIe-IPC


def test_a_plan_without_a_gpu_or_a_probe_names_gpu_and_a_gpu_count_below_the_tp_is_refused():
    result = _run(_plan_args("--regime", "healthy-p2p", "--accept", "2.4"))
    assert result.exit_code == 2 and "--gpu" in result.output
    for bad in ("-8", "4", "eight"):
        result = _run(_plan_args("--gpu", "rtx-pro-6000", "--gpus", bad, "--regime", "healthy-p2p"))
        assert result.exit_code == 2 and "--gpus" in result.output, bad


@pytest.mark.parametrize("spelling", ["healthy-p2p", "healthy P2P"])
def test_box_and_model_take_either_spelling_of_a_regime(spelling):
    plan = _run(_plan_args("--gpu", "rtx-pro-6000", "--regime", spelling, "--accept", "2.4"))
    model = _run(["model", "speculation", "--config", str(KIMI), "--gpu", "rtx-pro-6000", "--tp", "8", "--regime",
                  spelling, "--accept", "2.4", "--data-dir", str(DATA)])  # fmt: skip
    assert plan.exit_code == 0 and model.exit_code == 0, (plan.output, model.output)


def test_model_speculation_refuses_a_layout_box_refuses_for_memory_with_the_same_exit_code():
    model = _run(["model", "speculation", "--config", str(KIMI), "--gpu", "rtx-pro-6000", "--tp", "8", "--regime",
                  "healthy-p2p", "--accept", "2.4", "--expert-bits", "16", "--data-dir", str(DATA)])  # fmt: skip
    box = _run(_plan_args("--gpu", "rtx-pro-6000", "--regime", "healthy-p2p", "--accept", "2.4", "--expert-bits", "16"))
    assert model.exit_code == box.exit_code == 2
    assert "GB of weights per GPU" in model.output and "GB of weights per GPU" in box.output


def test_an_slo_nothing_meets_prints_no_launch_command():
    result = _run(["box", "--plan", "--config", str(QWEN), "--gpu", "h200", "--load", "8", "--accept", "2.4",
                   "--slo-tpot-ms", "0.01", "--data-dir", str(DATA)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "nothing meets the SLO" in result.output and "launch the choice" not in result.output


@pytest.fixture(scope="module")
def fitted():
    fit = first_grid_fit(stored_runs(Evidence(DATA).measured))
    assert fit is not None
    return replace(fit.box, routing=Routing.UNIFORM), fit.overheads


def test_overlapping_goodput_is_printed_as_a_tie_with_what_breaks_it(fitted, capsys):
    box, overheads = fitted
    plan = choose(box, overheads, 16, Slo(2000, 50), accept=2.4, stated_for=4)
    chosen = plan.chosen.at_load.goodput
    runner = replace(plan.runner_up, at_load=replace(plan.runner_up.at_load, goodput=Span(chosen.low, chosen.high)))
    print_plan(replace(plan, runner_up=runner), Evidence(DATA).launch_target("0.5.22"))
    out = " ".join(capsys.readouterr().out.split())
    assert "a tie" in out and "--verify" in out


def test_the_plan_shows_the_loops_own_stored_error():
    result = _run(["box", "--plan", "--config", str(QWEN), "--gpu", "h200", "--load", "8", "--accept", "2.4",
                   "--data-dir", str(DATA)])  # fmt: skip
    assert "this loop's last check" in result.output and "median" in result.output
    from verifylab.analysis.box_verify import verify_runs
    from verifylab.store.evidence import Evidence

    runs = Evidence(DATA).measured
    newest = runs.run(verify_runs(runs)[-1])
    said = " ".join(result.output.split())
    assert f"on {newest.label}, predicted" in said and newest.run_id in said  # the box it ran on, not the one asked
    planned = newest.parameters["box_plan"]["inputs"]["host overhead"]  # a plan made before it named its drafting one
    assert f"its plan's host overhead: {' '.join(planned.split())})" in said  # which grid's overheads it was priced on


def _settings(tmp_path: Path, *extra: str, tp: int = 1, output_tokens: int = 8) -> Path:
    file = tmp_path / "verify.yaml"
    base = {"model_path": "m", "draft_model_path": "d", "port": free_port(), "launcher": TEST_LAUNCHER,
            "tp_size": tp, "extra_args": ["--step-ms", "2", *extra]}  # fmt: skip
    settings = {"base": base, "output_tokens": output_tokens, "hold_accept": True, "label": "test double"}
    file.write_text(yaml.safe_dump(settings))
    return file


def test_a_run_the_check_did_not_create_is_refused_before_anything_starts(tmp_path, fitted):
    data = tmp_path / "data"
    shutil.copytree(DATA / "runs" / "20261202-203301-box-probe", data / "runs" / "20261202-203301-box-probe")
    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)
    before = sorted(p.name for p in (data / "runs" / "20261202-203301-box-probe").iterdir())
    with pytest.raises(ParameterError, match=r"20261202-203301-box-probe.*did not create"):
        verify_on_box(plan, _settings(tmp_path), data, "20261202-203301-box-probe")
    assert sorted(p.name for p in (data / "runs" / "20261202-203301-box-probe").iterdir()) == before


@pytest.mark.slow  # starts the test double as each server: make test
def test_a_server_that_ignores_the_accept_length_is_refused_with_its_cells_named(tmp_path, fitted):
    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)
    liar = r"eagle3_\w+: (the server reported accept length 1\.00 against|\d+ request\(s\) accepted 1\.00 tokens)"
    with pytest.raises(CheckError, match=liar):
        verify_on_box(plan, _settings(tmp_path, "--ignore-accept"), tmp_path / "data", "liar")


@pytest.mark.slow  # starts the test double as each server: make test
@pytest.mark.parametrize("falls_back", ["", "VERIFYLAB_SIMULATE_NO_PCIE_IPC", "VERIFYLAB_SIMULATE_PCIE_IPC_FAILS_LATE"])
def test_a_server_that_runs_without_the_pcie_ipc_the_plan_priced_is_refused(tmp_path, fitted, monkeypatch, falls_back):
    """A plan priced on SGLang's PCIe-IPC all-reduce is checked on servers started with its switch; one whose log says
    it fell back to NCCL (a FlashInfer without the kernel; a workspace that failed on the first reduction, after the
    server said it was ready) measured another collective: its cells are refused."""
    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)
    plan = replace(plan, tp=2, collective="pcie_ipc")
    if falls_back:
        monkeypatch.setenv(falls_back, "1")  # read by the test double only
        with pytest.raises(CheckError, match=r"ran without it \(fell back"):
            verify_on_box(plan, _settings(tmp_path, tp=2), tmp_path / "data", "check")
    else:  # requests long enough that a held accept length reads as held (8 tokens quantize it past 5 %)
        verify_on_box(plan, _settings(tmp_path, tp=2, output_tokens=64), tmp_path / "data", "check")
    points = Evidence(tmp_path / "data").measured.read_table("check", "box_verify_points")
    assert set(points["pcie_ipc"]) == {"fell back" if falls_back else "enabled"}


@pytest.mark.slow  # starts the test double as each server: make test
@pytest.mark.parametrize("skipped", [False, True])
def test_a_server_that_runs_without_the_fusion_the_plan_priced_is_refused(tmp_path, fitted, skipped):
    """A plan priced on FlashInfer's fused all-reduce + RMSNorm is checked on servers started with it; one whose log
    says SGLang skipped fusion (its workspace preflight failed) measured NCCL: its cells are refused."""
    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)
    plan = replace(plan, tp=2, collective="fused")
    if skipped:  # the box answers SGLang's multicast query as a PCIe box without it would: its preflight skips
        file = _settings(tmp_path, tp=2)
        settings = yaml.safe_load(file.read_text())
        file.write_text(yaml.safe_dump({**settings, "base": {**settings["base"], "simulate_no_multicast": True}}))
        with pytest.raises(CheckError, match=r"FlashInfer's fused all-reduce \+ RMSNorm and the server ran without it"):
            verify_on_box(plan, file, tmp_path / "data", "check")
    else:
        verify_on_box(plan, _settings(tmp_path, tp=2, output_tokens=64), tmp_path / "data", "check")
    points = Evidence(tmp_path / "data").measured.read_table("check", "box_verify_points")
    assert set(points["fusion"]) == {"skipped" if skipped else "enabled"} and set(points["pcie_ipc"]) == {"off"}


@pytest.mark.slow  # starts the test double as each server: make test
def test_a_tied_pcie_ipc_server_that_fell_back_is_refused_alone(tmp_path, fitted, monkeypatch):
    """A tie launches NCCL and measures PCIe-IPC's best as one server more: where that server's log says it fell
    back to NCCL, its cells are refused (each server is checked on the all-reduce the plan priced for it, not on the
    one the plan launches), and the servers on NCCL are not."""
    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)
    plan = replace(plan, tp=2, collective="nccl", other_collective=plan.chosen)
    monkeypatch.setenv("VERIFYLAB_SIMULATE_NO_PCIE_IPC", "1")  # read by the test double only
    with pytest.raises(CheckError, match=r"_pcie_ipc: the plan priced SGLang's PCIe-IPC all-reduce and the server ran"):
        verify_on_box(plan, _settings(tmp_path, tp=2, output_tokens=64), tmp_path / "data", "check")
    points = Evidence(tmp_path / "data").measured.read_table("check", "box_verify_points")
    assert list(points["pcie_ipc"]) == ["off"] * (len(points) - 1) + ["fell back"]


@pytest.mark.slow  # starts the test double as each server: make test
@pytest.mark.parametrize(
    ("other_on", "column", "named"),
    [("", "pcie_ipc", "SGLang's PCIe-IPC all-reduce"), ("fused", "fusion", "FlashInfer's fused all-reduce + RMSNorm")],
)
def test_a_tie_of_the_all_reduces_is_measured_on_both_and_compared(tmp_path, fitted, other_on, column, named):
    """A plan whose all-reduces tie launches NCCL and its check measures the other's best on it (PCIe-IPC, or
    FlashInfer's fusion): one server more, whose log says it ran, compared with the plan's own under its role and
    all-reduce."""
    from verifylab.analysis.box_verify import compare, verdict

    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)
    plan = replace(plan, tp=2, collective="nccl", other_collective=plan.chosen, other_on=other_on)  # the choice
    verify_on_box(plan, _settings(tmp_path, tp=2, output_tokens=64), tmp_path / "data", "check")
    runs = Evidence(tmp_path / "data").measured
    points = runs.read_table("check", "box_verify_points")
    assert list(points[column]) == ["off"] * (len(points) - 1) + ["enabled"]
    table = compare(runs, "check")
    other = table[table["role"] == "other all-reduce"]
    assert len(other) == len(plan.streams) and other["measured_tokens_per_s"].notna().all()
    assert other["configuration"].str.endswith(f"on {named}").all()
    assert verdict(runs, "check", table).planned_cells == len(table)


@pytest.mark.slow  # starts the test double as each server: make test
def test_each_server_of_the_check_runs_the_backend_and_kv_dtype_the_plan_priced(tmp_path, fitted):
    """The plan's launch line names an attention backend and a KV dtype and covers the running cap with CUDA graphs:
    every server the check starts runs them (its file named none, and SGLang's own defaults may be others), as each
    server's log says; a file naming another backend is refused before anything starts, naming both; one naming the
    same KV dtype in its extra arguments is taken as it is."""
    from verifylab.bench.box_verify import VerifySettings, served_as_priced

    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)
    plan = replace(plan, attention_backend="triton", kv_cache_dtype="fp8_e4m3")
    verify_on_box(plan, _settings(tmp_path, output_tokens=64), tmp_path / "data", "check")
    logs = sorted((tmp_path / "data" / "runs" / "check").rglob("*.log"))
    started = [line for log in logs for line in log.read_text().splitlines() if "server_args=ServerArgs(" in line]
    assert len(started) == len(plan.measured_servers), started
    assert all("attention_backend='triton', kv_cache_dtype='fp8_e4m3'" in line for line in started)
    caps = sorted(s.priced.config.max_running for s in plan.measured_servers)  # CUDA graphs up to each server's cap
    assert sorted(int(line.rsplit("cuda_graph_max_bs_decode=", 1)[1].rstrip(")")) for line in started) == caps
    with pytest.raises(ParameterError, match="--attention-backend flashinfer against the plan's triton"):
        verify_on_box(plan, _settings(tmp_path, "--attention-backend", "flashinfer"), tmp_path / "data", "other")
    assert not (tmp_path / "data" / "runs" / "other").exists()
    same = VerifySettings.model_validate(yaml.safe_load(_settings(tmp_path, "--kv-cache-dtype=fp8_e4m3").read_text()))
    served = served_as_priced(plan, same, "verify.yaml").base
    assert served.kv_cache_dtype is None and served.attention_backend == "triton"  # the file's own flag stands
    remote = served_as_priced(replace(plan, trust_remote_code=True), same, "verify.yaml").base.extra_args
    assert remote.count("--trust-remote-code") == 1  # the plan's launch line has it: the model names remote code
    bf16 = replace(plan, kv_cache_dtype=None)  # a plan that priced the model's bf16: the file's fp8 is another
    with pytest.raises(ParameterError, match="--kv-cache-dtype fp8_e4m3 against the plan's bf16"):
        served_as_priced(bf16, same, "verify.yaml")
    for switch in (FUSION_OFF_FLAG, f"{FUSION_BACKEND_FLAG}=trtllm"):  # a file-wide fusion switch: each server's own
        fused = VerifySettings.model_validate(yaml.safe_load(_settings(tmp_path, switch).read_text()))
        with pytest.raises(ParameterError, match=f"{switch.split('=')[0]} against the plan's all-reduce per server"):
            served_as_priced(replace(plan, collective="fused", tp=2), fused, "verify.yaml")


@pytest.mark.slow  # starts the test double as each server: make test
def test_a_server_that_dies_ends_the_check_non_zero_with_the_cells_named(tmp_path, fitted):
    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)
    with pytest.raises(CheckError, match=r"cell\(s\) failed|not measured"):
        verify_on_box(plan, _settings(tmp_path, "--fault", "drop", "--fault-after", "2"), tmp_path / "data", "dies")


def test_a_real_box_check_has_its_plan_file_a_dry_run_and_its_checks_first(tmp_path):
    plan_file = ROOT / "benchmarks" / "box" / "verify-8gpu-tp8.yaml"
    args = _plan_args("--gpu", "rtx-pro-6000", "--regime", "healthy-p2p", "--verify", str(plan_file), "--dry-run",
                      "--budget-minutes", "60", "--run-id", "never-made", "--load", "8")  # fmt: skip
    result = _run(args)
    assert result.exit_code == 0, result.output
    assert "dry run: " in result.output and "at TP 8" in result.output
    servers = [line for line in result.output.splitlines() if line.startswith("  [")]
    assert servers and all("with SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1: SGLang's PCIe-IPC" in s for s in servers)
    launch = " ".join(result.output.split()).split("launch the choice: ", 1)[1]  # the file names neither: the plan's
    engine = re.search(
        r"each server: --attention-backend (\S+), --kv-cache-dtype (\S+), decode CUDA graphs up to its cap, as the "
        r"plan priced",
        " ".join(result.output.split()),
    )
    assert engine and f"--attention-backend {engine[1]} " in launch and f"--kv-cache-dtype {engine[2]} " in launch
    assert (
        "fusion stays off: the plan launches the all-reduce its all-reduce line names (fusion only where it prices"
        in launch
    )
    assert not (DATA / "runs" / "never-made").exists()  # nothing started, nothing written
    assert re.search(r"startup: (\d+) s per server", result.output)
    assert int(re.search(r"startup: (\d+) s per server", result.output).group(1)) > 150  # scaled by the weights
    tp1 = _run(["box", "--plan", "--config", str(QWEN), "--gpu", "h200", "--accept", "2.4", "--verify", str(plan_file),
                "--dry-run", "--data-dir", str(DATA)])  # fmt: skip
    assert tp1.exit_code == 2 and "tp_size 8 against the plan's TP 1" in " ".join(tp1.output.split())


def test_a_busy_port_is_refused_before_anything_starts(tmp_path, fitted):
    import socket

    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        file = tmp_path / "verify.yaml"
        base = {"model_path": "m", "draft_model_path": "d", "port": busy.getsockname()[1], "launcher": TEST_LAUNCHER}
        file.write_text(yaml.safe_dump({"base": base, "output_tokens": 8, "label": "test double"}))
        with pytest.raises(ParameterError, match="is in use: stop the production server first"):
            verify_on_box(plan, file, tmp_path / "data", "busy")
    assert not (tmp_path / "data" / "runs" / "busy").exists()


@pytest.mark.slow  # starts the test double as each server: make test
@pytest.mark.parametrize(
    ("liar", "said"),
    [
        (("--lie-after", "22"), r"request\(s\) accepted 1\.00 tokens per verify against the [\d.]+ held"),
        (("--no-verify-count",), r"request\(s\) reported no accept length"),
    ],
)
def test_every_request_of_a_held_server_is_checked_not_its_average(tmp_path, fitted, liar, said):
    """#77: a server that honours the held accept length through its warm-up and then stops, or that reports no verify
    count at all, is refused with its requests counted (the server's own running average hid both)."""
    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)
    with pytest.raises(CheckError, match=said):
        verify_on_box(plan, _settings(tmp_path, *liar), tmp_path / "data", "late-liar")
