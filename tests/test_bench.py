"""The real client and server lifecycle against the test double, started through the same launcher path."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from verifylab.bench.client import Client, accept_length, parse_spec_meta
from verifylab.bench.method import SingleStreamConfig
from verifylab.bench.runner import RunPlace, open_recorder, run_single, run_sweep
from verifylab.cli import app
from verifylab.errors import ServerError
from verifylab.server.launch import classify_failure, effective_state, last_error_line, launcher_help, serve
from verifylab.server.variants import DEFAULT_VARIANTS, BaseConfig, Variant, variant_command
from verifylab.stats import compare, crossover, summarize
from verifylab.store.evidence import Evidence
from verifylab.store.runs import RunStore

from .ports import free_port

TEST_LAUNCHER = [sys.executable, "-m", "verifylab.testing.server"]


def base(*extra: str, **over) -> BaseConfig:
    return BaseConfig(
        model_path="tiny",
        port=free_port(),
        launcher=TEST_LAUNCHER,
        draft_model_path="draft",
        extra_args=["--step-ms", "10", *extra],
        **over,
    )


@pytest.fixture(scope="module")
def help_text() -> str:
    return launcher_help(TEST_LAUNCHER)


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_single_stream_method_produces_a_complete_valid_run(tmp_path, help_text):
    cfg = base("--tokens-per-step", "3")
    with serve(cfg, DEFAULT_VARIANTS["eagle3"], tmp_path / "logs", help_text=help_text) as (server, state):
        assert state.speculative_algorithm == "EAGLE3" and state.active
        recorder = open_recorder(tmp_path / "data", "20261129-000000-test-single", "test double (not data)", {})
        summary = run_single(
            server.url, SingleStreamConfig(runs=3, warmup=1, max_tokens=30), recorder=recorder, variant="eagle3"
        )
    assert [r["output_tokens"] for r in summary["runs"]] == [30, 30, 30]
    assert summary["accept_length"] == pytest.approx(3.0)  # = configured tokens per step
    assert summary["server_accept_length"] == pytest.approx(3.0)  # cross-check after /flush_cache
    assert summary["median_interval_output_tokens_per_s"][0] <= summary["median_output_tokens_per_s"]
    store = RunStore(tmp_path / "data" / "runs")
    manifest = store.manifest("20261129-000000-test-single")  # validates the schema
    assert {"single-eagle3", "single_stream"} <= set(manifest.tables)
    assert store.read_table(manifest.run_id, "single-eagle3")["output_tokens"].tolist() == [30, 30, 30]
    assert (tmp_path / "logs" / "server-eagle3.log").is_file()


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_sweep_is_complete_and_resumes(tmp_path, help_text):
    cfg = base("--tokens-per-step", "2")
    with serve(cfg, DEFAULT_VARIANTS["baseline"], tmp_path / "logs", help_text=help_text) as (server, _):
        rec = open_recorder(tmp_path / "data", "20261129-000000-test-sweep", "test double (not data)", {})
        first = run_sweep(server.url, [1, 2], 12, requests_per_cell=4, recorder=rec, variant="baseline")
        assert [c["concurrency"] for c in first["cells"]] == [1, 2]
        again = run_sweep(server.url, [1, 2, 4], 12, requests_per_cell=4, recorder=rec, variant="baseline")
    assert again["skipped_concurrency"] == [1, 2]
    assert [c["concurrency"] for c in again["cells"]] == [4]
    cells = RunStore(tmp_path / "data" / "runs").read_table("20261129-000000-test-sweep", "sweep_cells")
    assert sorted(cells["concurrency"]) == [1, 2, 4]
    assert (cells["failed"] == 0).all()


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_interrupted_sweep_keeps_finished_cells(tmp_path, help_text):
    cfg = base()
    with serve(cfg, DEFAULT_VARIANTS["baseline"], tmp_path / "logs", help_text=help_text) as (server, _):
        rec = open_recorder(tmp_path / "data", "20261129-000000-test-ctrlc", "test double (not data)", {})

        def interrupt(name, done, total):  # a crash in the middle of cell 2 (Ctrl-C behaves the same)
            if "C=2" in name:
                raise RuntimeError("simulated crash")

        with pytest.raises(RuntimeError, match="simulated crash"):
            run_sweep(server.url, [1, 2], 6, requests_per_cell=2, recorder=rec, variant="b", progress=interrupt)
        assert rec.has_cell("b", 1) and not rec.has_cell("b", 2)
        resumed = run_sweep(server.url, [1, 2], 6, requests_per_cell=2, recorder=rec, variant="b")
    assert resumed["skipped_concurrency"] == [1]


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("500", "HTTP 500"),
        ("drop", "dropped mid-stream"),
        ("malformed", "malformed stream chunk"),
        ("stall", "timeout: the server stalled"),
        ("keepalive", "timeout: the server stalled (no token within 1 s)"),
    ],
)
def test_faults_are_recorded_and_finished_cells_kept(tmp_path, help_text, fault, expected):
    cfg = base("--fault", fault, "--fault-after", "2")
    with serve(cfg, DEFAULT_VARIANTS["baseline"], tmp_path / "logs", help_text=help_text) as (server, _):
        rec = open_recorder(tmp_path / "data", f"20261129-000000-fault-{fault}", "test double (not data)", {})

        async def go():
            async with Client(server.url, stall_s=1.0) as client:
                return [await client.generate("p", 12) for _ in range(3)]

        results = asyncio.run(go())
        assert [r.ok for r in results] == [True, True, False]
        assert expected in results[2].error
        run_sweep(server.url, [1], 12, requests_per_cell=1, recorder=rec, variant="v", stall_s=1.0)
    cells = RunStore(tmp_path / "data" / "runs").read_table(f"20261129-000000-fault-{fault}", "sweep_cells")
    assert cells["failed"].tolist() == [1]
    assert expected in cells["errors"].iloc[0]


def test_a_request_past_its_deadline_fails_named_and_a_stall_is_said_while_it_lasts(tmp_path, help_text):
    """#77: `box --verify` gives each request a deadline (a slow stream past it fails as a deadline, not as a stall)
    and says, while requests wait for a token, how many and how long, before the stall limit fails them."""
    slow = base("--step-ms", "300")  # the last --step-ms wins; 12 tokens: 3.6 s, each token well within the stall limit
    with serve(slow, DEFAULT_VARIANTS["baseline"], tmp_path / "slow", help_text=help_text) as (server, _):

        async def one(deadline_s: float):
            async with Client(server.url, timeout_s=deadline_s, stall_s=5.0) as client:
                return await client.generate("p", 12)

        late = asyncio.run(one(1.0))
        assert not late.ok and late.error == "deadline: the request did not finish within 1 s"
        assert asyncio.run(one(30.0)).ok
    lines: list[str] = []
    stalling = base("--fault", "stall", "--fault-after", "0")
    with serve(stalling, DEFAULT_VARIANTS["baseline"], tmp_path / "stall", help_text=help_text) as (server, _):
        result = run_sweep(server.url, [1], 12, requests_per_cell=1, stall_s=2.0, stalled=lines.append)
    assert result["failed_cells"] and "timeout: the server stalled" in result["failed_cells"][0]["errors"][0]
    assert lines and all("server C=1: 1 request(s) waiting for a token" in line for line in lines), lines
    assert "(a request fails at 2 s without one)" in lines[-1]


def test_unknown_flag_and_port_in_use_are_reported_before_start(tmp_path, help_text):
    with (
        pytest.raises(ServerError, match=r"the installed SGLang \(its --help\) does not accept --no-such-flag"),
        serve(base("--no-such-flag"), DEFAULT_VARIANTS["baseline"], tmp_path, help_text=help_text),
    ):
        pass
    cfg = base()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", cfg.port))
        holder.listen()
        with (
            pytest.raises(ServerError, match=rf"port {cfg.port} on 127.0.0.1 is in use"),
            serve(cfg, DEFAULT_VARIANTS["baseline"], tmp_path, help_text=help_text),
        ):
            pass
    assert not (tmp_path / "server-baseline.log").exists()  # nothing started


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_early_exit_is_classified(tmp_path, help_text):
    cfg = base("--exit-with", "RuntimeError: No supported CUDA architectures found for major versions [9, 10].")
    with (
        pytest.raises(ServerError, match=r"\[sm120_jit_gate\]: FlashInfer's JIT arch list"),
        serve(cfg, DEFAULT_VARIANTS["fusion"], tmp_path, help_text=help_text),
    ):
        pass


def test_fusion_flags_follow_the_installed_version(help_text):
    cfg = base()

    def args(variant: str, help_text: str) -> tuple[str, ...]:
        return variant_command(cfg, DEFAULT_VARIANTS[variant], help_text).args

    fused = args("fusion", help_text)
    assert fused[fused.index("--flashinfer-allreduce-fusion-backend") + 1] == "trtllm"  # never mnnvl, never auto
    assert "--enforce-disable-flashinfer-allreduce-fusion" in args("baseline", help_text)
    old_help = "--model-path --tp-size --host --port --enable-flashinfer-allreduce-fusion " + " ".join(
        a for a in base().extra_args if a.startswith("--")
    )
    assert "--enable-flashinfer-allreduce-fusion" in args("fusion", old_help)
    assert "--enforce-disable-flashinfer-allreduce-fusion" not in args("baseline", old_help)


def test_effective_state_marks_inactive_mechanisms():
    fusion = Variant(name="fusion", fusion=True)
    assert effective_state(fusion, {"tp_size": 1}, "").inactive_reasons == ["TP 1: there is no all-reduce to fuse"]
    skipped = effective_state(fusion, {"tp_size": 8}, "WARNING ... Skipping allreduce fusion.")
    assert skipped.fusion == "skipped" and not skipped.active and "preflight" in skipped.inactive_reasons[0]
    spec_off = effective_state(DEFAULT_VARIANTS["eagle3"], {"server_args": {"tp_size": 8}}, "")
    assert spec_off.inactive_reasons == ["speculation is off in the running server"]
    # SGLang 0.5.17 at TP 1 (live smoke): the backend asked for stays 'auto', the resolved switch is False
    resolved = {"tp_size": 1, "flashinfer_allreduce_fusion_backend": "auto", "flashinfer_allreduce_fusion": False}
    tp1 = effective_state(fusion, {"server_args": resolved}, "")
    assert tp1.fusion == "off" and not tp1.active


ENABLED_LINE = (
    "INFO flashinfer_comm_fusion.py:530 FlashInfer AllReduce Fusion enabled and workspace initialized: "
    "backend=trtllm, rank=0, world_size=2, max_token_num=2048, hidden_dim=1024"
)


def test_pcie_ipc_in_effect_comes_from_the_log_and_a_fallback_wins():
    """SGLang's PCIe-IPC all-reduce is opt-in and falls back to NCCL without saying so anywhere but its log: a server
    asked for it is active only where the log says it is enabled."""
    ipc = Variant(name="plain", pcie_ipc=True)
    enabled = "FlashInfer PCIe-IPC all-reduce enabled (world=8, workspace sized on first reduction)"
    state = effective_state(ipc, {"tp_size": 8}, enabled)
    assert state.pcie_ipc == "enabled" and state.active and state.as_row()["pcie_ipc"] == "enabled"
    no_kernel = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is set but this FlashInfer build has no pcie_ipc_comm; falling back"
    for log in (f"{no_kernel} to NCCL all-reduce.", f"{enabled}\nFlashInfer PCIe-IPC workspace (max_numel=4) failed"):
        fell = effective_state(ipc, {"tp_size": 8}, log)
        assert fell.pcie_ipc == "fell back" and not fell.active and "PCIe-IPC" in fell.inactive_reasons[0]
    bf16_only = "FlashInfer PCIe-IPC all-reduce serves bf16 only; torch.float32 reductions stay on NCCL."
    assert effective_state(ipc, {"tp_size": 8}, f"{enabled}\n{bf16_only}").active  # bf16 still runs on it
    assert effective_state(ipc, {"tp_size": 8}, "").pcie_ipc == "unverified"
    tp1 = effective_state(ipc, {"tp_size": 1}, enabled)
    assert tp1.inactive_reasons == ["TP 1: there is no all-reduce for PCIe-IPC"]
    assert effective_state(Variant(name="plain"), {"tp_size": 8}, enabled).pcie_ipc == "off"  # not asked for


def test_fusion_in_effect_comes_from_the_log_not_the_server_args():
    fusion = Variant(name="fusion", fusion=True)
    args = {"tp_size": 2, "flashinfer_allreduce_fusion_backend": "trtllm", "flashinfer_allreduce_fusion": True}
    # requested and resolved True, but nothing in the log: not shown to be in effect
    unverified = effective_state(fusion, args, "Auto-enabling FlashInfer AllReduce Fusion on SM90/SM10X for X")
    assert unverified.fusion == "unverified" and not unverified.active
    assert effective_state(fusion, args, ENABLED_LINE).active
    # a skip after the preflight wins over the backend the args keep (the PCIe failure mode)
    pcie = "FlashInfer workspace preflight probe failed (CUDA_ERROR_NOT_SUPPORTED). Skipping allreduce fusion."
    assert effective_state(fusion, args, pcie).fusion == "skipped"
    failed = "Failed to initialize FlashInfer workspace (backend=trtllm): boom. Disabling flashinfer allreduce fusion"
    assert effective_state(fusion, args, failed + " permanently.").fusion == "skipped"
    # a baseline whose log shows an initialized workspace is fused: never a fusion-off baseline
    fused_baseline = effective_state(Variant(name="baseline"), {"tp_size": 8}, ENABLED_LINE)
    assert not fused_baseline.active and "baseline is fused" in fused_baseline.inactive_reasons[0]
    guard = effective_state(fusion, args, ENABLED_LINE + "\nverifylab multicast guard loaded in pid 7")
    assert guard.multicast_guard and not effective_state(fusion, args, ENABLED_LINE).multicast_guard


def test_failure_signatures():
    assert classify_failure("torch.OutOfMemoryError: CUDA out of memory.")[0] == "cuda_oom"
    assert classify_failure("NCCL error in: ...")[0] == "nccl_error"
    assert classify_failure("error: unrecognized arguments: --foo")[0] == "unknown_argument"
    assert classify_failure("all good")[0] == "unknown"


def test_real_sglang_start_failure_names_the_missing_package(repo_root):
    # SGLang 0.5.17 on the H200 (live smoke): fastapi raises a RuntimeError, not an ImportError
    log = (repo_root / "tests" / "data" / "sglang_0_5_17" / "server-start-missing-multipart.log").read_text()
    name, advice = classify_failure(log)
    assert name == "missing_package" and "'python-multipart'" in advice
    assert last_error_line(log) == 'RuntimeError: Form data requires "python-multipart" to be installed. '.strip()
    assert classify_failure("ModuleNotFoundError: No module named 'xgrammar'") == (
        "import_error",
        "a Python dependency is missing: no module named 'xgrammar'",
    )
    assert last_error_line("INFO all fine") is None


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_campaign_where_no_variant_starts_fails_loudly_and_keeps_the_states(tmp_path):
    from verifylab.bench.campaign import run_campaign

    cfg = base("--exit-with", "RuntimeError: boom")
    with pytest.raises(ServerError, match=r"no variant started.*RuntimeError: boom"):
        place = RunPlace(tmp_path, "no-start", "double")
        run_campaign(cfg, ["baseline", "ngram"], SingleStreamConfig(1, 0, 4), [1], 4, place)
    states = pd.read_csv(tmp_path / "runs" / "no-start" / "variant_state.csv")
    assert list(states.active) == [False, False]


def test_sglang_0_5_17_meta_info_shape():
    # keys as SGLang 0.5.17's tokenizer manager writes them; counts of the live smoke's first NGRAM request
    # (256 tokens in 95 verify passes, 4 draft tokens a pass)
    meta = {
        "completion_tokens": 256,
        "spec_verify_ct": 95,
        "spec_accept_length": 256 / 95,
        "spec_accept_rate": 161 / 285,
        "spec_num_correct_drafts": 161,
        "spec_num_proposed_drafts": 285,
        "spec_accepted_drafts": 161,
        "spec_proposed_drafts": 285,
    }
    assert parse_spec_meta(meta)["spec_verify_ct"] == 95
    without_count = {k: v for k, v in meta.items() if k != "spec_verify_ct"}
    assert parse_spec_meta(without_count)["spec_verify_ct"] == pytest.approx(95)


def test_spec_meta_spellings_and_token_weighted_accept_length():
    assert parse_spec_meta({"completion_tokens": 30, "spec_accept_length": 3.0})["spec_verify_ct"] == 10
    assert parse_spec_meta({"spec_accept_token_num": 5, "spec_draft_token_num": 8}) == {
        "spec_accept_token_num": 5,
        "spec_draft_token_num": 8,
    }
    from verifylab.bench.client import RequestResult

    rs = [
        RequestResult("a", "c", True, output_tokens=30, meta={"spec_verify_ct": 10}),
        RequestResult("b", "c", True, output_tokens=10, meta={"spec_verify_ct": 10}),
    ]
    assert accept_length(rs) == pytest.approx(2.0)  # 40 / 20, not the mean of 3.0 and 1.0
    assert accept_length([RequestResult("a", "c", True, output_tokens=5, meta={})]) is None


def test_statistics():
    stats = summarize([1, 2, 3, 4, 100])
    assert stats["median"] == 3 and stats["p99"] > 90
    same = compare([92.6], [92.6, 92.6, 92.6, 92.7, 93.1])
    assert not same["resolved"] and "no difference" in same["verdict"]  # the case study's 92.6 vs 92.6
    faster = compare([54.1, 54.0, 54.3, 54.2, 54.1], [96.1, 96.0, 96.3, 95.9, 96.2])
    assert faster["resolved"] and faster["ratio"] == pytest.approx(96.1 / 54.1, rel=1e-3)


def _cells(ratios: dict[int, float]) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for c, ratio in ratios.items():
        for _ in range(20):
            rows.append({"variant": "twin", "concurrency": c, "per_request_tokens_per_s": 50 + rng.normal(0, 0.5)})
            rows.append(
                {"variant": "spec", "concurrency": c, "per_request_tokens_per_s": 50 * ratio + rng.normal(0, 0.5)}
            )
    return pd.DataFrame(rows)


def test_crossover_on_contrasting_sweeps():
    inside = crossover(_cells({1: 1.6, 4: 1.3, 16: 1.1, 32: 0.8, 64: 0.6}), "spec", "twin")
    assert inside["status"] == "crosses" and inside["bracket"] == (16, 32)
    assert 16 < inside["estimate"] < 32
    assert crossover(_cells({1: 1.5, 64: 1.2}), "spec", "twin")["status"] == "wins everywhere"
    assert crossover(_cells({1: 0.8, 64: 0.5}), "spec", "twin")["status"] == "loses everywhere"


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_cli_bench_and_sweep_json(tmp_path, help_text):
    cfg = base("--tokens-per-step", "2", "--speculative-algorithm", "NGRAM")
    with serve(cfg, DEFAULT_VARIANTS["baseline"], tmp_path, help_text=help_text) as (server, _):
        runner = CliRunner()
        out = runner.invoke(
            app, ["bench", "--url", server.url, "--runs", "2", "--warmup", "0", "--max-tokens", "8", "--json"]
        )
        assert out.exit_code == 0, out.output
        data = json.loads(out.output)
        assert len(data["runs"]) == 2 and all(r["output_tokens_per_s"] > 0 for r in data["runs"])
        assert len(data["median_interval_output_tokens_per_s"]) == 2 and data["accept_length"] == pytest.approx(2.0)
        out = runner.invoke(
            app,
            [
                "sweep",
                "--url",
                server.url,
                "--concurrency",
                "1,2",
                "--max-tokens",
                "8",
                "--requests-per-cell",
                "2",
                "--json",
            ],
        )
        assert out.exit_code == 0, out.output
        cells = json.loads(out.output)["cells"]
        assert [c["concurrency"] for c in cells] == [1, 2]
        assert all({"output_tokens_per_s", "median_itl_ms", "accept_length"} <= set(c) for c in cells)
    bad = CliRunner().invoke(app, ["sweep", "--url", "http://127.0.0.1:9", "--concurrency", "x"])
    assert bad.exit_code == 2 and "--concurrency 'x'" in bad.output


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_campaign_records_states_and_keeps_inactive_variants_out(tmp_path, repo_root):
    from verifylab.analysis.benchmarks import (
        benchmark_section,
        load_curves_chart,
        pareto_chart,
        stored_benchmarks,
        sweep_views,
    )
    from verifylab.bench.campaign import run_campaign

    cfg = base("--tokens-per-step", "2")
    states = run_campaign(
        cfg,
        ["baseline", "fusion", "ngram"],
        SingleStreamConfig(2, 0, 8),
        [1, 2],
        8,
        RunPlace(tmp_path / "data", "20261129-000000-campaign", "test double (not data)"),
        seed=3,
    )
    by_variant = states.set_index("variant")
    assert not by_variant.loc["fusion", "active"]  # TP 1: nothing to fuse
    assert "TP 1" in by_variant.loc["fusion", "inactive_reasons"]
    assert by_variant.loc["baseline", "active"] and by_variant.loc["ngram", "active"]
    stored = stored_benchmarks(Evidence(tmp_path / "data"))
    assert set(stored["single"].variant) == {"baseline", "fusion", "ngram"}
    html = benchmark_section(Evidence(tmp_path / "data"))._repr_html_()
    assert "Single stream (active variants only)" in html
    single_html = html.split("Single stream (active variants only)")[1].split("Sweep cells")[0]
    assert "ngram" in single_html and ">fusion<" not in single_html
    assert "Pareto view" in html and "Greedy outputs vs the baseline" in html
    assert ">yes</td>" in html.split("Greedy outputs vs the baseline")[1]  # the double's outputs agree
    shown = re.sub(r"<[^>]+>", "", single_html)
    assert "order-statistic interval, 2 runs, 50 % coverage" in shown and "ci95" not in shown  # method, coverage
    cells, pareto, slo, tpot = sweep_views(Evidence(tmp_path / "data"))
    assert slo == "SLOs: time to first token <= 2 s, time per output token <= 50 ms" and tpot == 50
    assert set(pareto.variant) == {"baseline", "ngram"}  # the inactive fusion is never charted
    for figure in (pareto_chart(pareto, slo), load_curves_chart(cells, tpot)):
        assert "<svg" in figure._repr_html_() and "20261129-000000-campaign" in " ".join(figure.provenance)


def test_greedy_divergence_position():
    from verifylab.stats import first_divergence

    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert first_divergence([1, 2, 3], [1, 2]) == 2


def test_runner_works_inside_a_running_event_loop():
    """Live chapters run inside a Jupyter kernel, whose event loop is already running."""
    from verifylab.server.aio import run_coroutine

    async def kernel_cell():
        return run_coroutine(asyncio.sleep(0, result=5))

    assert asyncio.run(kernel_cell()) == 5


def test_failure_names_the_module_that_stopped_the_server_not_an_ignored_one():
    # SGLang 0.5.17 at TP 2 with EAGLE-3 on the H200s (run 20261130-080118-2xh200-live-tp2): an optional model
    # module's import is ignored at start-up; the draft graph capture then dies on deep_gemm
    log = (
        "[2026-11-30 08:03:03 TP1] Ignore import error when loading sglang.srt.models.inkling: No module named "
        "'helion'\n"
        "[2026-11-30 08:04:07 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/tmp/tp2/site/sglang/srt/layers/attention/dsa_backend.py", line 90, in <module>\n'
        "    import deep_gemm\n"
        "ModuleNotFoundError: No module named 'deep_gemm'\n"
    )
    name, advice = classify_failure(log)
    assert name == "import_error" and "deep_gemm" in advice and "helion" not in advice


@pytest.mark.slow  # starts a server
def test_a_cells_ttft_is_the_servers_not_the_clients_start_up(tmp_path, help_text):
    """#42 item 5: the first wave of a cell opens its connections before it is timed. The test double makes the
    first request on each new connection wait 2 s (a cold client); its TTFT is 50 ms."""
    import asyncio

    from verifylab.bench.client import Client

    cfg = base("--prefill-ms", "50", "--connect-ms", "2000")
    with serve(cfg, DEFAULT_VARIANTS["baseline"], tmp_path / "logs", help_text=help_text) as (server, _):

        async def cold_wave() -> list[float]:
            async with Client(server.url) as client:
                wave = await asyncio.gather(*(client.generate("cold", 4) for _ in range(8)))
                return [r.ttft_s for r in wave]

        cold = asyncio.run(cold_wave())
        sweep = run_sweep(server.url, [8], 4, requests_per_cell=8)
    (cell,) = sweep["cells"]
    assert min(cold) >= 2.0  # an unwarmed first wave pays the connections (the test can fail)
    assert 0.05 <= cell["median_ttft_ms"] / 1e3 < 1.0  # the sweep's first wave does not (a loaded box adds less)


@pytest.mark.slow  # starts a server
def test_a_run_against_the_test_double_says_so_and_is_never_evidence(tmp_path, help_text):
    """#43 item 4: the double says what it is on every answer; the harness marks the run (mechanics only, with a
    note), and a manifest that claims otherwise for such a run is refused."""
    import json

    from verifylab.errors import ManifestError

    with serve(base(), DEFAULT_VARIANTS["baseline"], tmp_path / "logs", help_text=help_text) as (server, _):
        rec = open_recorder(tmp_path / "data", "20261129-000000-test-origin", "test double (not data)", {})
        run_sweep(server.url, [1], 4, requests_per_cell=1, recorder=rec, variant="baseline")
    store = RunStore(tmp_path / "data" / "runs")
    manifest = store.manifest("20261129-000000-test-origin")
    assert manifest.test_double and manifest.mechanics_only and any("test double" in n for n in manifest.notes)
    path = store.path(manifest.run_id) / "manifest.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"mechanics_only": False}))
    with pytest.raises(ManifestError, match="never evidence"):
        store.manifest(manifest.run_id)
