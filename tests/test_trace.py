import gzip
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.errors import TraceError
from verifylab.synth.runner import SynthConfig, run_synth_verify
from verifylab.trace import summarize_traces
from verifylab.trace.analyze import STEP_COLUMNS
from verifylab.trace.classify import classify_kernel
from verifylab.trace.intervals import union_length, union_lengths
from verifylab.trace.ranks import align_ranks

from .procs import descendants
from .tracefactory import event, write_trace

GPU_FIXTURES = Path(__file__).parent / "data" / "gpu_h200_single"


@pytest.fixture(scope="module")
def gloo_61(tmp_path_factory):
    out = tmp_path_factory.mktemp("gloo61")
    run_synth_verify(
        SynthConfig(backend="gloo", ranks=2, layers=61, hidden=64, tokens=4, steps=2, context=32, profile_dir=out)
    )
    return out


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_real_gloo_traces_count_122_allreduces_per_step_on_every_rank(gloo_61):
    summary = summarize_traces([gloo_61])
    steps = summary.steps
    assert sorted(steps["rank"].unique()) == [0, 1]
    assert len(steps) == 4  # 2 ranks x 2 steps
    assert (steps["allreduce_count"] == 122).all()
    assert (steps["allreduce_impls"] == "gloo:122").all()  # c10d op + gloo op counted once
    assert (steps["comm_us"] > 0).all()
    assert steps["comm_wait_us"].notna().all()  # ranks aligned: wait + transfer split


def test_c10d_and_backend_op_on_same_thread_count_once(tmp_path):
    events = [event("verify_step#0", "user_annotation", 0, 1000)]
    for i in range(3):
        t = 100 + i * 200
        events.append(event("c10d::allreduce_", "cpu_op", t, 100))
        events.append(
            event(
                "record_param_comms",
                "cpu_op",
                t + 1,
                98,
                **{"Collective name": "allreduce", "In msg nelems": 7168, "dtype": "BFloat16"},
            )
        )
        events.append(event("nccl:all_reduce", "cpu_op", t + 2, 90))
    summary = summarize_traces([write_trace(tmp_path / "t.json", events)])
    row = summary.steps.iloc[0]
    assert row["allreduce_count"] == 3
    assert row["bytes_per_allreduce"] == 7168 * 2
    assert row["bytes_source"].startswith("trace")


def test_fused_flashinfer_kernel_is_an_allreduce_and_a_norm(tmp_path):
    k = [event("cudaGraphLaunch", "cuda_runtime", 0, 5, correlation=7)]
    t = 10
    for _ in range(4):
        k.append(
            event(
                "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<"
                "__nv_bfloat16, 8, 4>(...)",
                "kernel",
                t,
                10,
                tid=7,
                correlation=7,
            )
        )
        k.append(event("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT", "kernel", t + 12, 20, tid=7, correlation=7))
        t += 40
    steps = summarize_traces([write_trace(tmp_path / "fused-TP-0.trace.json.gz", k, gz=True)]).steps
    row = steps.iloc[0]
    assert row["allreduce_count"] == 4
    assert row["allreduce_impls"] == "flashinfer_fused:4"
    assert row["comm_us"] == pytest.approx(40.0)
    assert row["compute_us"] == pytest.approx(80.0)


def test_nccl_suffix_is_a_name_not_a_fact(tmp_path):
    k = [event("cudaGraphLaunch", "cuda_runtime", 0, 5, correlation=1)]
    k += [
        event(
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "kernel",
            10 + 30 * i,
            20,
            tid=7,
            correlation=1,
        )
        for i in range(5)
    ]
    k += [event("ncclDevKernel_AllGather_RING_LL(x)", "kernel", 200, 5, tid=7, correlation=1)]
    summary = summarize_traces([write_trace(tmp_path / "r.json", k)], message_bytes=4 * 7168 * 2)
    row = summary.steps.iloc[0]
    assert (row["allreduce_count"], row["allgather_count"]) == (5, 1)
    assert row["nccl_name_suffixes"] == "RING_LL:5"
    assert row["bytes_source"].startswith("model config")
    assert any("names, not proof" in n for n in summary.notes)


def test_real_h200_graph_trace_by_markers_and_by_graph_launches():
    unfused = summarize_traces([GPU_FIXTURES / "unfused-TP-0.trace.json.gz"])
    fused = summarize_traces([GPU_FIXTURES / "fused-TP-0.trace.json.gz"])
    for summary in (unfused, fused):
        assert len(summary.steps) == 2
        assert (summary.steps["allreduce_count"] == 0).all()
        assert any("no collective" in n for n in summary.notes)
        assert (summary.steps["attention_us"] > 0).all() and (summary.steps["gemm_moe_us"] > 0).all()
    # FlashInfer's fused add+RMSNorm replaces several PyTorch kernels per norm: fewer kernels per step
    assert fused.steps["kernel_count"].iloc[0] < unfused.steps["kernel_count"].iloc[0]
    classes = fused.kernel_classes.groupby("group")["count"].sum()
    assert classes["attention"] == 2 * 61  # one SDPA kernel per layer and step
    # SGLang traces carry no step markers: CUDA-graph launches delimit the steps instead
    by_graph = summarize_traces([GPU_FIXTURES / "unfused-TP-0.trace.json.gz"], step_marker="^no-such-marker$")
    assert len(by_graph.steps) == 2
    assert list(by_graph.steps["kernel_count"]) == list(unfused.steps["kernel_count"])
    assert by_graph.steps["source"].str.contains("CUDA-graph launches").all()


def test_align_ranks_splits_wait_and_transfer():
    import pandas as pd

    steps = pd.DataFrame([{col: None for col in STEP_COLUMNS} | {"rank": r, "step": 0} for r in (0, 1)])
    colls = pd.DataFrame(
        {"rank": [0, 1], "step": [0, 0], "ordinal": [0, 0], "start_us": [0.0, 50.0], "dur_us": [100.0, 50.0]}
    )
    out = align_ranks(steps, colls)
    assert list(out["comm_wait_us"]) == [50.0, 0.0]
    assert list(out["comm_transfer_us"]) == [50.0, 50.0]


def test_interval_arithmetic():
    assert union_length([(0, 10), (5, 15), (20, 30)]) == 25
    assert union_length([(0, 10), (10, 20)]) == 20  # touching intervals join


def test_union_lengths_of_many_sets_agree_with_one_set_at_a_time():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n, keys = int(rng.integers(0, 60)), int(rng.integers(1, 6))
        key = rng.integers(0, keys, n)
        start = np.round(rng.uniform(0, 100, n), int(rng.integers(0, 2)))  # whole numbers too: ties and touches
        end = start + np.round(rng.uniform(0, 15, n), int(rng.integers(0, 2)))
        got = union_lengths(key, start, end, keys)
        want = [union_length(list(zip(start[key == k], end[key == k], strict=True))) for k in range(keys)]
        assert got == pytest.approx(want)
    assert union_lengths(np.array([1, 1, 2]), np.array([0.0, 5, 3]), np.array([10.0, 15, 4]), 4).tolist() == [
        0,
        15,
        1,
        0,
    ]


@pytest.mark.parametrize(
    ("name", "group", "impl"),
    [
        ("ncclDevKernel_AllReduce_Sum_f16_TREE_LL(x)", "allreduce", "nccl"),
        ("ncclKernel_AllReduce_RING_LL_Sum_bfloat16(x)", "allreduce", "nccl"),
        (
            "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_twoshot_sync<half>",
            "allreduce",
            "flashinfer_fused",
        ),
        ("void cross_device_reduce_1stage<__nv_bfloat16, 8>(...)", "allreduce", "custom"),
        ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>", "norm", None),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16", "attention", None),
        ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT", "gemm_moe", None),
        ("fused_moe_kernel", "gemm_moe", None),
        # named as SGLang 0.5.17 emitted them on the H200 (live smoke): Triton attention, tree verification
        ("_fwd_kernel", "attention", None),
        ("_fwd_grouped_kernel_stage1", "attention", None),
        (
            "void VerifyTreeGreedy<int, long>(int*, int*, int*, long*, long*, long*, long*, long*, unsigned int)",
            "spec_verify",
            None,
        ),
        ("reconstructIndicesFromTreeMask(bool*, long*, long*, long*, long*, long*, int, int)", "spec_verify", None),
        ("assign_extend_cache_locs", "other", None),
    ],
)
def test_kernel_classification(name, group, impl):
    cls = classify_kernel(name)
    assert (cls.group, cls.impl) == (group, impl)


def test_truncated_trace_names_file_and_offset(tmp_path):
    good = write_trace(tmp_path / "good.json", [event("verify_step#0", "user_annotation", 0, 10)] * 50)
    cut = tmp_path / "cut.json"
    data = good.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"cut\.json: truncated at byte \d+"):
        summarize_traces([cut])
    gz = tmp_path / "cut.json.gz"
    gz.write_bytes(gzip.compress(data)[:200])
    with pytest.raises(TraceError, match=r"cut\.json\.gz: "):
        summarize_traces([gz])


def test_non_json_and_empty_traces(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("this is not a trace")
    with pytest.raises(TraceError, match=r"bad\.json: not JSON \(byte 0"):
        summarize_traces([bad])
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(TraceError, match=r"empty\.json: empty file"):
        summarize_traces([empty])
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"traceEvents": [{"ph": "X", "name": "a"}, {oops}]}')
    with pytest.raises(TraceError, match=r"garbage\.json: invalid JSON at byte 44"):
        summarize_traces([garbage])
    with pytest.raises(TraceError, match="no such file"):
        summarize_traces([tmp_path / "missing.json"])


def test_trace_without_collectives_says_so(tmp_path):
    path = write_trace(
        tmp_path / "c.json",
        [event("verify_step#0", "user_annotation", 0, 100), event("nvjet_gemm", "kernel", 10, 20)],
    )
    summary = summarize_traces([path])
    assert summary.steps["allreduce_count"].tolist() == [0]
    assert summary.notes == ["no collective operation (all-reduce or other) was found in these traces"]


@pytest.mark.slow  # its fixture starts processes (ranks): make test
def test_cli_json_on_a_folder(gloo_61):
    result = CliRunner().invoke(app, ["trace", "summarize", str(gloo_61), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert len(data["steps"]) == 4
    for row in data["steps"]:
        assert {"rank", "step", "allreduce_count", "comm_us", "compute_us", "idle_us"} <= set(row)
        assert row["allreduce_count"] == 122
    table = CliRunner().invoke(app, ["trace", "summarize", str(gloo_61)])
    assert table.exit_code == 0 and "gloo:122" in table.output


def long_fused_trace(path: Path, steps: int) -> Path:
    """A target pass of 3 fused all-reduces and a draft pass of 1 custom one, ``steps`` times each."""
    fused = "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<half>"
    events = []
    for i in range(steps):
        t = i * 1000.0
        events.append(event(f"target#{i}", "gpu_user_annotation", t, 500, tid=7))
        events += [event(fused, "kernel", t + 10 + 100 * j, 20 + i % 3, tid=7) for j in range(3)]
        events.append(event(f"draft#{i}", "gpu_user_annotation", t + 600, 300, tid=7))
        events += [event("cross_device_reduce_1stage", "kernel", t + 650, 10, tid=7)]
    return write_trace(path, events)


def test_a_long_trace_is_printed_by_phase_and_written_whole_to_csv(tmp_path):
    trace = long_fused_trace(tmp_path / "x-TP-0.trace.json", steps=30)  # 60 steps: more than a screen
    summary = summarize_traces([trace])
    by_phase = summary.per_phase().set_index("phase")
    assert by_phase.loc["target", ["steps", "ranks", "allreduce_count"]].tolist() == [30, 1, 3]
    assert by_phase.loc["target", "allreduce_impls"] == "flashinfer_fused:3"
    assert by_phase.loc["draft", "allreduce_impls"] == "custom:1"
    target_steps = summary.steps[summary.steps["phase"] == "target"]
    assert by_phase.loc["target", "comm_us"] == pytest.approx(target_steps["comm_us"].mean())
    assert not any("NCCL" in note for note in summary.notes)  # fused and custom names are not NCCL suffixes
    csv_path = tmp_path / "out" / "steps.csv"
    csv_path.parent.mkdir()
    printed = CliRunner().invoke(app, ["trace", "summarize", str(trace), "--csv", str(csv_path)])
    assert printed.exit_code == 0, printed.output
    assert "mean per step by phase" in printed.output and "target#" not in printed.output
    assert len(csv_path.read_text().splitlines()) == 1 + 60
    every = CliRunner().invoke(app, ["trace", "summarize", str(trace), "--all-steps"])
    assert every.exit_code == 0 and "mean per step by phase" not in every.output


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_capture_from_a_server_profiler_and_summarize(tmp_path):
    """Drive /start_profile on the test double (which writes per-rank traces like SGLang) and summarize."""
    import sys

    from verifylab.server.launch import serve
    from verifylab.server.profile import capture_profile
    from verifylab.server.variants import DEFAULT_VARIANTS, BaseConfig

    from .test_bench import free_port

    cfg = BaseConfig(
        model_path="tiny",
        tp_size=2,
        port=free_port(),
        launcher=[sys.executable, "-m", "verifylab.testing.server"],
        extra_args=["--step-ms", "5"],
    )
    with serve(cfg, DEFAULT_VARIANTS["baseline"], tmp_path / "logs") as (server, _):
        traces = capture_profile(server.url, tmp_path / "profile", num_steps=3, timeout_s=30)
    assert [t.name for t in traces] == ["test-double-TP-0.trace.json.gz", "test-double-TP-1.trace.json.gz"]
    steps = summarize_traces(traces, message_bytes=4 * 7168 * 2).steps
    assert len(steps) == 6 and (steps["allreduce_count"] == 4).all()
    assert steps["source"].str.contains("CUDA-graph launches").all()


def test_real_sglang_ngram_profile_tp1(repo_root):
    """The live smoke's own profile (SGLang 0.5.17, NGRAM, TP 1, H200): no all-reduce anywhere; the passes
    come from SGLang's own step markers on the GPU timeline (step[EXTEND] -> prefill, step[TARGET_VERIFY] ->
    target), and kernels keep their emitted names."""
    run = repo_root / "data" / "runs" / "20261129-114733-h200-live-smoke"
    summary = summarize_traces(sorted((run / "profile").glob("*.trace.json.gz")))
    assert summary.steps["allreduce_count"].sum() == 0
    assert "no collective operation (all-reduce or other) was found in these traces" in summary.notes
    assert not any("message sizes" in note for note in summary.notes)
    assert summary.steps["source"].str.endswith("steps from step markers (GPU timeline)").all()
    phases = summary.steps.groupby("phase")["kernel_count"]
    assert set(phases.groups) == {"target", "prefill"}
    assert phases.nunique()["target"] == 1  # every verify pass replays the same graph
    assert (summary.steps.loc[summary.steps.phase == "target", "attention_us"] > 0).all()
    kernels = summary.kernels.set_index("kernel")
    assert kernels.loc["_fwd_kernel", "group"] == "attention"
    assert (
        kernels.loc[
            "void VerifyTreeGreedy<int, long>(int*, int*, int*, long*, long*, long*, long*, long*, "
            "unsigned int, unsigned int, unsigned int)",
            "group",
        ]
        == "spec_verify"
    )
    assert summary.kernels["total_us"].is_monotonic_decreasing


def test_sglang_custom_allreduce_v2_is_an_allreduce():
    """SGLang 0.5.17's custom all-reduce (JIT-built v2) names neither 'nccl' nor 'custom': seen on 2 x H200."""
    name = (
        "void (anonymous namespace)::all_reduce_kernel<(anonymous namespace)::AllReducePushImpl<__nv_bfloat16, 2u, "
        "true>, 2u, 1>((anonymous namespace)::AllReduceParams<2u>)"
    )
    kind = classify_kernel(name)
    assert (kind.group, kind.impl, kind.name_suffix) == ("allreduce", "custom", "v2_push")


def small_synth(tmp_path: Path, **over) -> SynthConfig:
    base = dict(backend="gloo", ranks=2, layers=3, hidden=32, tokens=2, steps=2, context=8, profile_dir=tmp_path)
    return SynthConfig(**(base | over))


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
@pytest.mark.parametrize(
    ("per_layer", "comm", "expected"), [(1, "allreduce", 3), (0, "allreduce", 0), (2, "compute_only", 0)]
)
def test_elimination_stand_ins_remove_exactly_those_allreduces(tmp_path, per_layer, comm, expected):
    run_synth_verify(small_synth(tmp_path, allreduces_per_layer=per_layer, comm=comm))
    if expected == 0:
        assert not list(tmp_path.glob(".*")), "no sidecar left"
        steps = summarize_traces([tmp_path]).steps
        assert (steps["allreduce_count"] == 0).all()
    else:
        assert (summarize_traces([tmp_path]).steps["allreduce_count"] == expected).all()


SYNTH_ARGS = (
    *("synth-verify", "--backend", "gloo", "--ranks", "2", "--layers", "3", "--hidden", "32", "--tokens", "2"),
    *("--context", "8", "--steps", "2", "--no-summarize"),
)


def _synth_under(tmp_path: Path, fault: str, *args: str) -> subprocess.CompletedProcess:
    """``verifylab synth-verify`` run by a Python that injects ``fault`` into its ranks (the test double of
    :mod:`verifylab.testing.faults`, no switch in the product)."""
    from verifylab.testing.faults import write_launcher

    launcher = write_launcher(tmp_path / "bin", ["--rank", fault])
    cmd = [str(launcher), "-m", "verifylab.cli", *SYNTH_ARGS, "--profile-dir", str(tmp_path / "out"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240)


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_a_rank_that_dies_mid_pass_ends_the_command_with_one_line_and_no_sidecar(tmp_path):
    (tmp_path / "bin").mkdir()
    result = _synth_under(tmp_path, "1:profile", "--timeout", "20")
    assert result.returncode == 1, result.stderr  # a runtime failure; 2 is click's usage error
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error:")]
    assert lines == ["error: synth-verify: rank 1 died in phase 'profile' (exit code 3); all ranks ended"]
    assert not list((tmp_path / "out").glob(".*")) and not list((tmp_path / "out").glob("*.tmp"))


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_a_rank_that_hangs_ends_every_rank_within_the_timeout(tmp_path):
    (tmp_path / "bin").mkdir()
    result = _synth_under(tmp_path, "1:profile:hang", "--timeout", "3")
    assert result.returncode == 1, result.stderr
    assert re.search(r"rank 0 failed in phase 'profile': .*Timed out", result.stdout + result.stderr)
    assert not list((tmp_path / "out").glob(".*"))


@pytest.mark.slow  # starts processes (ranks) and kills them: make test
def test_a_killed_synth_verify_leaves_no_rank_running(tmp_path):
    """The ranks are forked from a server process, not from verifylab: kill -9 of verifylab still ends them."""
    import signal
    import subprocess
    import sys
    import time

    from .procs import clear_what_a_kill_left, temporary_entries

    cmd = [sys.executable, "-m", "verifylab.cli", "synth-verify", "--backend", "gloo", "--ranks", "2"]
    cmd += ["--layers", "2", "--hidden", "16", "--tokens", "2", "--context", "8", "--steps", "2", "--timeout", "120"]
    cmd += ["--profile-dir", str(tmp_path), "--no-summarize"]
    before = temporary_entries()
    from verifylab.testing.faults import write_launcher

    (tmp_path / "bin").mkdir()
    cmd[0] = str(write_launcher(tmp_path / "bin", ["--rank", "1:profile:hang"]))  # its ranks' Python hangs rank 1
    proc = subprocess.Popen(cmd)
    deadline = time.monotonic() + 60
    phase = tmp_path / ".rank1.phase"
    while not (phase.exists() and phase.read_text() == "profile"):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    below = descendants(proc.pid)
    assert len(below) >= 3  # the rank server and two ranks
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 15
    while below & descendants(1) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = below & descendants(1)
    assert not left, [Path(f"/proc/{p}/cmdline").read_text()[:200] for p in left]
    clear_what_a_kill_left(before, ("pytorch-errorfile-",))  # torch's per-rank error files: the killed run's to remove


def test_fused_comm_needs_gpus_and_says_so(tmp_path):
    with pytest.raises(ValueError, match=r"FlashInfer kernels need GPUs"):
        small_synth(tmp_path, comm="fused")


def test_a_folder_with_sidecars_and_dotfiles_summarizes_the_traces_only(gloo_61, tmp_path):
    import shutil

    for trace in gloo_61.glob("synth-TP-*.trace.json.gz"):
        shutil.copy(trace, tmp_path / trace.name)
    (tmp_path / ".rank0.times.json").write_text("[1.0, 2.0]")
    (tmp_path / ".rank1.json").write_text("{}")
    (tmp_path / "synth-TP-0.times.json").write_text("[1.0]")
    summary = summarize_traces([tmp_path])
    assert sorted(Path(f).name for f in summary.files) == ["synth-TP-0.trace.json.gz", "synth-TP-1.trace.json.gz"]
    assert (summary.steps["allreduce_count"] == 122).all()


def test_two_files_claiming_one_rank_are_refused(gloo_61, tmp_path):
    import shutil

    shutil.copy(gloo_61 / "synth-TP-0.trace.json.gz", tmp_path / "1000.1-TP-0.trace.json.gz")
    shutil.copy(gloo_61 / "synth-TP-0.trace.json.gz", tmp_path / "2000.2-TP-0.trace.json.gz")
    with pytest.raises(TraceError, match="both claim rank 0"):
        summarize_traces([tmp_path])


def sglang_eagle3_cycle(t0: float) -> list[dict]:
    """One EAGLE-3 cycle as SGLang 0.5.17 annotates it: CPU ranges, their GPU-timeline copies 500 us later,
    the draft model's step[EXTEND] nested in draft_extend; kernels only on the GPU side."""
    ar = "void (anonymous namespace)::all_reduce_kernel<(anonymous namespace)::AllReducePushImpl<bf16, 2u, true>>"
    spans = [("draft", 0, 300, 2), ("step[TARGET_VERIFY bs=2]", 400, 300, 13), ("draft_extend", 800, 400, 3)]
    events = []
    for name, start, dur, n_allreduce in spans:
        for cat, shift in (("user_annotation", 0), ("gpu_user_annotation", 500)):
            events.append(event(name, cat, t0 + start + shift, dur, tid=1 if shift == 0 else 7))
        for i in range(n_allreduce):
            events.append(event(ar, "kernel", t0 + start + 500 + 10 + i * 20, 5, tid=7))
    events.append(event("step[EXTEND bs=2 toks=8]", "user_annotation", t0 + 850, 200))  # nested in draft_extend
    events.append(event("step[EXTEND bs=2 toks=8]", "gpu_user_annotation", t0 + 1350, 200, tid=7))
    events.append(event("nccl:_all_gather_base", "gpu_user_annotation", t0 + 1260, 5, tid=7))  # not a step
    events.append(event("sampling_kernel", "kernel", t0 + 1290, 5, tid=7))  # between steps: in none
    return events


def test_sglang_step_markers_on_the_gpu_timeline_give_target_draft_and_draft_extend(tmp_path):
    """The verify pass is step[TARGET_VERIFY]; kernels belong to the GPU copy of a range (they run after the CPU
    range that launched them); a step nested in another belongs to the outer one."""
    events = sglang_eagle3_cycle(0) + sglang_eagle3_cycle(2000)
    steps = summarize_traces([write_trace(tmp_path / "x-TP-0.trace.json", events)]).steps
    assert list(steps["phase"]) == ["draft", "target", "draft_extend"] * 2
    assert list(steps["allreduce_count"]) == [2, 13, 3] * 2
    assert list(steps["kernel_count"]) == [2, 13, 3] * 2  # the sampling kernel between steps is in none
    assert steps["source"].str.endswith("(GPU timeline)").all()


@pytest.mark.parametrize(
    ("name", "phase"),
    [
        ("step[TARGET_VERIFY bs=2]", "target"),
        ("step[DECODE bs=8]", "target"),
        ("step[EXTEND bs=1 toks=12]", "prefill"),
        ("draft_extend", "draft_extend"),
        ("ProfilerStep#12", "ProfilerStep"),
        ("step[SOMETHING_NEW bs=1]", "something_new"),
    ],
)
def test_phase_of_marker(name, phase):
    from verifylab.trace.steps import DEFAULT_STEP_MARKER, phase_of_marker

    assert re.match(DEFAULT_STEP_MARKER, name)
    assert phase_of_marker(name) == phase


def test_the_collector_is_paused_while_a_rank_is_read_and_restored_whatever_happens():
    import gc

    from verifylab.trace.analyze import collector_paused

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("a bad trace")
    assert gc.isenabled()  # restored after an error
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def test_an_event_whose_name_or_category_is_no_text_is_dropped_not_a_crash(tmp_path):
    """A name or category that is a list, a mapping or a number (no dict key, no category the analysis knows) is
    nothing the summary keeps: the trace's step and its one kernel are still counted."""
    events = [
        event("ProfilerStep#1", "user_annotation", 0.0, 100.0),
        {**event("x", "cpu_op", 1.0, 2.0), "name": ["a", "b"]},
        {**event("x", "cuda_runtime", 1.0, 2.0), "name": {"cudaGraphLaunch": 1}},
        {**event("x", "kernel", 1.0, 2.0), "cat": ["kernel"]},
        {**event("y", "kernel", 1.0, 2.0), "cat": 7},
        event("k", "kernel", 3.0, 1.0, tid=7, pid=0, correlation=1),
    ]
    steps = summarize_traces([write_trace(tmp_path / "t.json", events)]).steps
    assert steps["kernel_count"].tolist() == [1] and steps["phase"].tolist() == ["ProfilerStep"]
