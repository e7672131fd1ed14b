import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.gates.preflight import box_preflight
from verifylab.host import HostInfo
from verifylab.model.pricing.floors import INT4_BYTES, decode_weight_bytes_per_gpu, limits_table
from verifylab.shapes import (
    KIMI_K2,
    ShardShape,
    expected_distinct_experts,
    expert_bytes_per_layer_all,
)
from verifylab.store.runs import RunStore
from verifylab.vocab import allreduce_message_bytes


def test_kimi_k2_tp8_shard_sizes():
    shard = ShardShape(KIMI_K2, 8)
    assert (shard.heads, shard.expert_inter, shard.dense_inter) == (8, 256, 2304)
    assert expert_bytes_per_layer_all(shard) / 1e9 == 384 * 3 * 7168 * 256 * 2 / 1e9  # ~4.2 GB per layer
    assert round(expert_bytes_per_layer_all(shard) / 1e9, 1) == 4.2
    assert allreduce_message_bytes(4) == 4 * 14 * 1024


def test_expected_distinct_experts():
    import pytest

    assert expected_distinct_experts(1) == pytest.approx(8)
    assert 100 < expected_distinct_experts(16) < 120
    assert expected_distinct_experts(10_000) == pytest.approx(384)


def test_decode_floor_arithmetic():
    int4 = decode_weight_bytes_per_gpu(8, 1, INT4_BYTES)
    bf16 = decode_weight_bytes_per_gpu(8, 1, 2.0)
    assert int4 < bf16
    table = limits_table({"x": (1000.0, "assumed")}, allreduce_floor_us=10.0)
    row = table[table.precision == "bf16"].iloc[0]
    assert row.weight_stream_ms == bf16 / 1e12 * 1e3
    assert row.allreduce_floor_ms == 122 * 10.0 / 1e3
    assert row.tokens_per_s_ceiling == 1e3 / row.step_floor_ms


def test_preflight_on_a_box_without_gpu(monkeypatch):
    monkeypatch.setattr("verifylab.gates.preflight._p2p_pairs", lambda: None)  # the box described here has no torch
    host = HostInfo(
        host="cpu", os="Linux", python="3.11.0", versions={"flashinfer": "0.6.4"}, interconnect="none (no GPU)"
    )
    checks = box_preflight(host).set_index("check")
    assert checks.loc["GPU architecture", "result"] == "no GPU" and not checks.loc["GPU architecture", "ok"]
    assert not checks.loc["FlashInfer version", "ok"] and "0.6.17" in checks.loc["FlashInfer version", "action"]
    assert (
        "Skipping allreduce fusion"
        in checks.loc["NVLink multicast (for SGLang's workspace preflight and symmetric memory)", "action"]
    )


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_synth_verify_stores_a_measured_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app,
        [
            "synth-verify",
            "--backend",
            "gloo",
            "--ranks",
            "2",
            "--layers",
            "2",
            "--hidden",
            "32",
            "--tokens",
            "2",
            "--steps",
            "2",
            "--context",
            "8",
            "--profile-dir",
            str(tmp_path / "prof"),
            "--no-summarize",
            "--run-id",
            "20261129-000000-cpu-synth",
            "--label",
            "CPU gloo (test)",
            "--data-dir",
            str(tmp_path / "data"),
        ],
    )
    assert result.exit_code == 0, result.output
    store = RunStore(tmp_path / "data" / "runs")
    steps = store.read_table("20261129-000000-cpu-synth", "trace_steps")
    assert (steps["allreduce_count"] == 4).all() and len(steps) == 4
    assert store.manifest("20261129-000000-cpu-synth").label == "CPU gloo (test)"
