"""The probe's measurement loop and its failure handling, on CPU processes (gloo): the same code path as on GPUs
minus CUDA graphs and FlashInfer."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.comm.config import ProbeConfig, default_tokens
from verifylab.comm.policy import read_policy
from verifylab.comm.probe import resolve_devices, run_probe
from verifylab.comm.record import store_probe
from verifylab.errors import CommProbeError, RunExistsError
from verifylab.store.runs import RunStore


def _cfg(**kw) -> ProbeConfig:
    base = {"backend": "gloo", "ranks": 2, "tokens": [1, 4], "replays": 3, "calls": 2, "subgroup_tokens": [4]}
    return ProbeConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """One 2-rank gloo probe, shared by the tests that only read it."""
    return run_probe(_cfg(), tmp_path_factory.mktemp("probe") / "w")


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_two_ranks_measure_every_size_and_record_the_slowest_rank(two_ranks):
    from verifylab.comm.tables import latency_table

    raw = two_ranks
    assert [r["rank"] for r in raw.ranks] == [0, 1]
    table = latency_table(raw)
    assert list(table["tokens"]) == [1, 4] and set(table["mode"]) == {"eager"}
    assert (table["us"] <= table["us_slowest_rank"]).all() and (table["rank_skew_us"] >= 0).all()
    assert (table["rel_err"] < 1e-5).all()  # the sum every rank got is the exact sum
    assert set(table["path"]) == {"gloo"}


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_four_ranks_add_every_pair_and_both_halves(tmp_path: Path):
    from verifylab.comm.tables import latency_table

    table = latency_table(run_probe(_cfg(ranks=4, tokens=[1], replays=3, calls=1), tmp_path / "w"))
    groups = set(table["group"])
    assert {"all", "half:0-1", "half:2-3"} <= groups
    assert sum(g.startswith("pair:") for g in groups) == 6
    assert set(table.loc[table["group"].str.startswith("pair:"), "ranks"]) == {2}


def _ranks_under(tmp_path: Path, monkeypatch, fault: str) -> None:
    """The probe's ranks start under a Python that injects ``fault`` (a rank dies or hangs entering a phase): the
    test double of :mod:`verifylab.testing.faults`, no switch in the product."""
    from verifylab.comm import probe
    from verifylab.testing.faults import write_launcher

    monkeypatch.setattr(probe.sys, "executable", str(write_launcher(tmp_path, ["--rank", fault])))


@pytest.mark.slow  # starts processes (ranks): make test
def test_the_ranks_meet_in_their_own_folder_whatever_holds_the_ports(tmp_path: Path, monkeypatch):
    """The ranks' rendezvous is a file of the probe's own: a port another process holds (here: every port the
    probe could have been handed) and a rendezvous file a killed probe left behind stop nothing. Meeting on a TCP
    port chosen by binding port 0 and closing it, rank 0 found the port taken and the probe failed."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()
        monkeypatch.setattr(socket.socket, "getsockname", lambda self: taken)  # whatever is bound: the held port
        work = tmp_path / "w"
        work.mkdir()
        (work / "rendezvous").write_bytes(b"keys of a probe that was killed")
        raw = run_probe(_cfg(tokens=[1], replays=3, calls=1, subgroup_tokens=[1]), work)
    assert [r["rank"] for r in raw.ranks] == [0, 1]


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_a_rank_that_dies_ends_all_with_one_line(tmp_path: Path, monkeypatch):
    _ranks_under(tmp_path, monkeypatch, "1:allreduce")
    with pytest.raises(CommProbeError, match=r"rank 1 failed in phase 'allreduce' \(exit 3\)"):
        run_probe(_cfg(), tmp_path / "w")


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_an_init_that_never_completes_times_out(tmp_path: Path, monkeypatch):
    _ranks_under(tmp_path, monkeypatch, "1:init:hang")
    with pytest.raises(CommProbeError, match=r"initialisation did not complete within --timeout 3 s"):
        run_probe(_cfg(timeout=3), tmp_path / "w")


@pytest.mark.slow  # its fixture starts processes (ranks): make test
def test_stored_run_has_every_table_and_refuses_to_overwrite(tmp_path: Path, two_ranks):
    raw = two_ranks
    runs = tmp_path / "data" / "runs"
    manifest = store_probe(raw, runs, "20261201-gloo-probe")
    assert set(manifest.tables) == {
        "allreduce_latency",
        "p2p_matrix",
        "nccl_transport",
        "p2p_host_settings",
        "verdict",
        "rank_map",
        "nccl_graph",
    }
    assert manifest.mechanics_only and manifest.gpu_count == 0
    policy = read_policy(runs / "20261201-gloo-probe")
    assert policy.regime == "not applicable" and not policy.fusion_allowed
    assert sorted(p.name for p in runs.iterdir()) == ["20261201-gloo-probe"]  # no staging folder left
    with pytest.raises(RunExistsError):
        store_probe(raw, runs, "20261201-gloo-probe")


@pytest.mark.slow  # starts processes (ranks): make test
def test_a_path_that_returns_wrong_sums_is_refused_not_timed(tmp_path: Path, monkeypatch):
    """The test double of a broken peer path: the ranks' sum loses every peer's part. The probe's check refuses to
    time it, the verdict names it, and the policy forbids tensor parallelism on that box."""
    from verifylab.comm import probe
    from verifylab.comm.tables import latency_table
    from verifylab.testing.broken_path import write_launcher

    monkeypatch.setattr(probe.sys, "executable", str(write_launcher(tmp_path)))  # the ranks' Python
    raw = run_probe(_cfg(tokens=[4]), tmp_path / "w")
    table = latency_table(raw)
    whole = table[table["group"] == "all"]
    assert not whole["correct"].any() and whole["us"].isna().all()
    assert whole["note"].str.contains("wrong result: relative error").all()
    runs = tmp_path / "runs"
    manifest = store_probe(raw, runs, "20261201-broken-probe")
    assert manifest.mechanics_only  # a run made with the test double is never evidence
    verdict = RunStore(runs).read_table("20261201-broken-probe", "verdict").iloc[0]
    assert verdict["refused_paths"] == "gloo" and "returned wrong data" in verdict["reason"]
    policy = read_policy(runs / "20261201-broken-probe")
    assert not policy.tensor_parallel and policy.sglang_flags == ["--tp-size", "1"]


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_a_gloo_probe_is_no_latency_curve_for_the_model(tmp_path: Path, two_ranks):
    from verifylab.errors import ModelInputError
    from verifylab.model.inputs.curves import load_curves
    from verifylab.store.runs import RunStore

    runs = tmp_path / "runs"
    store_probe(two_ranks, runs, "20261201-gloo-probe")
    with pytest.raises(ModelInputError, match="no NCCL or fused all-reduce rows"):
        load_curves("20261201-gloo-probe", RunStore(runs).measured())


def test_the_measured_probe_feeds_model_pass_with_graph_rows_of_all_ranks():
    from verifylab.model.inputs.curves import load_curves
    from verifylab.store.runs import RunStore

    store = RunStore(Path(__file__).resolve().parents[2] / "data" / "runs")
    curves = {(c.path, c.impl): c for c in load_curves("20261201-092338-2xh200-probe-p2p", store.measured())}
    assert set(curves) == {("p2p", "nccl"), ("p2p", "fused")}
    table = store.read_table("20261201-092338-2xh200-probe-p2p", "allreduce_latency")
    graph = table[(table["impl"] == "nccl") & (table["mode"] == "graph") & (table["group"] == "all")]
    assert curves[("p2p", "nccl")].us == tuple(graph.sort_values("tokens")["us"])


def test_default_sizes_cover_the_verify_pass_and_chapter_04_loads():
    tokens = default_tokens()
    assert tokens[0] == 1 and tokens[-1] == 512
    assert {32, 64, 128, 256} <= set(tokens)  # 8 and 32 streams x 4 and 8 draft tokens


def _fake_torch(monkeypatch, count: int) -> None:
    fake = types.SimpleNamespace(
        __version__="2.x",
        version=types.SimpleNamespace(cuda="13.0"),
        cuda=types.SimpleNamespace(is_available=lambda: count > 0, device_count=lambda: count),
    )
    monkeypatch.setitem(sys.modules, "torch", fake)
    import verifylab.comm.probe as probe_module

    monkeypatch.setattr(probe_module, "no_gpu_reason", lambda: None)  # the fake torch stands in for the GPUs


def test_no_gpu_seen_by_torch_is_one_line(monkeypatch):
    _fake_torch(monkeypatch, 0)
    with pytest.raises(CommProbeError, match="needs CUDA GPUs"):
        resolve_devices(ProbeConfig())


def test_one_gpu_is_probed_alone(monkeypatch):
    """One GPU: its identity, NCCL's version and the checks; the verdict says TP 1 has nothing to judge."""
    _fake_torch(monkeypatch, 1)
    assert resolve_devices(ProbeConfig()) == (1, [0])
    with pytest.raises(CommProbeError, match=r"GPU\(s\) \[1\] not visible \(1 visible\)"):
        resolve_devices(ProbeConfig(gpus=[0, 1]))


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["--tokens", ""], 2, "--tokens '': give a comma-separated list"),
        (["--tokens", "4,-1"], 2, "token counts must be positive"),
        (["--tokens", "four"], 2, "not a comma-separated list of integers"),
        (["--gpus", "0"], 2, "a GPU count from 1 to 1024"),
        (["--run-id", "Bad Id"], 2, "not a plain run name"),
        ([], 1, "comm probe needs CUDA GPUs"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: list[str], code: int, text: str):
    data = tmp_path / "data"
    result = CliRunner().invoke(app, ["comm", "probe", "--data-dir", str(data), *args])
    assert result.exit_code == code, result.output
    assert text in result.output.replace("\n", " ")
    assert not (data / "runs").exists() or not any((data / "runs").iterdir())


def test_help_teaches_with_an_example():
    result = CliRunner().invoke(app, ["comm", "probe", "--help"])
    assert result.exit_code == 0 and "Example:" in result.output
