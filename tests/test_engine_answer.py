"""#80: the answer for the engine and backend the owner runs. SGLang's verify re-prices a public (vLLM) matrix's
transfer from the stored serial-kernel growth scaled by layers and heads per GPU; the KV pool caps the distinct
streams at the owner's context (the page's own pool, or the one ``--mem-fraction`` leaves); vLLM answers are the
matrices' own prices."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.errors import ModelInputError
from verifylab.model.answers.engine_answer import SGLANG_DEFAULT_BACKEND, engine_choice, verify_growth
from verifylab.model.fits import verify_kernels
from verifylab.model.inputs.configs import read_config, read_config_json
from verifylab.model.inputs.context_matrix import context_matrices
from verifylab.model.inputs.gpus import GPU_TABLE, gpu_named
from verifylab.model.inputs.stored import stored_runs
from verifylab.model.pricing.attention import kv_pool_tokens
from verifylab.model.pricing.verify_kernels import VerifyKernel, attention_shape, waves
from verifylab.store.evidence import Evidence

ROOT = Path(__file__).resolve().parents[1]
KIMI = ROOT / "examples" / "configs" / "kimi-k2.5-int4" / "config.json"
BOX = ["--config", str(KIMI), "--gpu", "rtx-pro-6000", "--tp", "8", "--regime", "healthy-p2p"]


def _speculation(*extra: str, data: Path = ROOT / "data") -> tuple[int, dict | str]:
    result = CliRunner().invoke(app, ["model", "speculation", *BOX, "--data-dir", str(data), *extra])
    return result.exit_code, (json.loads(result.output) if result.exit_code == 0 else result.output)


def test_the_default_backend_table_is_the_audited_one():
    with (ROOT / "data" / "gates" / "verify_path.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["item"] == "default attention backend"]
    assert rows
    for row in rows:
        assert SGLANG_DEFAULT_BACKEND[(row["shape"], row["gpu"])] == row["value"], row["version"]


def test_sglang_on_sm120_verifies_kimi_with_the_serial_kernel_by_default():
    choice = engine_choice("sglang", None, None, None, mla=True, arch="SM120", matrix_kv="fp8")
    assert (choice.backend, choice.kernel, choice.kv_dtype) == ("triton", VerifyKernel.SERIAL, "fp8")
    assert (
        engine_choice("sglang", None, None, None, mla=True, arch="SM90", matrix_kv=None).kernel
        is VerifyKernel.FLASHINFER
    )
    for bad in (
        ("vllm", "triton", None),
        ("vllm", None, "serial"),
        ("sglang", "flashinfer", "split-kv"),
        ("tgi", None, None),
    ):
        with pytest.raises(ModelInputError):
            engine_choice(bad[0], bad[1], bad[2], None, mla=True, arch="SM120", matrix_kv=None)


def test_the_serial_growth_is_the_stored_rate_scaled_by_layers_and_heads_per_gpu():
    serial = verify_kernels.serial_rate(stored_runs(Evidence(ROOT / "data").measured).engine)
    assert serial is not None
    rate = serial[0]
    shape = attention_shape(read_config_json(KIMI), 8)
    assert shape.q_heads == 8  # 64 heads over TP 8
    layers, sms = read_config(KIMI).layers, GPU_TABLE["rtx-pro-6000"].sms
    choice = engine_choice("sglang", None, None, "fp8", mla=True, arch="SM120", matrix_kv="fp8")
    growth = verify_growth(choice, shape, layers, gpu_named("rtx-pro-6000"), sms, 256.0, rate, None)
    assert growth is not None
    for context, streams in ((32768, 1), (65536, 4), (65536, 64)):
        scale = waves(streams * shape.q_heads, sms, rate.programs_per_sm)
        expected = layers * rate.ms_per_1k(shape).high * (context - 256) / 1000 * scale
        assert growth(context, streams).high == pytest.approx(expected)


def test_the_sglang_default_answer_at_32k_and_64k_moves_with_the_stored_serial_growth(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIFYLAB_CACHE", "off")
    data = tmp_path / "data"
    shutil.copytree(ROOT / "data", data)
    before = {c: _speculation("--context", str(c), "--json", data=data)[1] for c in (32768, 65536)}
    for table in data.glob("runs/*/context_cells.parquet"):  # every stored MLA cycle grows twice as fast
        cells = pd.read_parquet(table)
        mla = (cells["shape"] == "mla") & (cells["mode"] == "eagle3")
        for _, part in cells[mla].groupby(["backend", "streams"]):
            base = part.loc[part["context"].idxmin(), "cycle_ms"]
            cells.loc[part.index, "cycle_ms"] = base + 2 * (part["cycle_ms"] - base)
        cells.to_parquet(table)
    for context, answer in before.items():
        code, after = _speculation("--context", str(context), "--json", data=data)
        assert code == 0 and isinstance(after, dict) and isinstance(answer, dict), after
        assert "serial" in after["inputs"]["engine"]
        for old, new in zip(answer["rows"], after["rows"], strict=True):
            assert new["plain_tokens_per_s_low"] == old["plain_tokens_per_s_low"]
            assert new["spec_tokens_per_s_high"] < 0.8 * old["spec_tokens_per_s_high"]


def test_the_pool_caps_distinct_streams_at_32k_and_mem_fraction_moves_it():
    matrix = next(m for m in context_matrices(Evidence(ROOT / "data").public_context) if m.spec_pool_tokens)
    code, page = _speculation("--context", "32768", "--json")
    assert code == 0 and isinstance(page, dict)
    assert page["stream_cap"] == matrix.spec_pool_tokens // 32768
    assert max(r["streams"] for r in page["rows"]) == page["stream_cap"]
    target = read_config(KIMI)
    from verifylab.model.inputs.configs import eagle3_draft_for

    pool = kv_pool_tokens(target, eagle3_draft_for(target), gpu_named("rtx-pro-6000"), 8, 0.85, kv_bytes=1.0)
    code, owner = _speculation("--context", "32768", "--mem-fraction", "0.85", "--json")
    assert code == 0 and isinstance(owner, dict) and owner["stream_cap"] == pool // 32768 != page["stream_cap"]
    code, refused = _speculation("--context", "32768", "--mem-fraction", "0.6")
    assert code != 0 and "short by" in str(refused)
    code, shared = _speculation("--context", "32768", "--shared-prefix", "--json")
    assert code == 0 and isinstance(shared, dict) and shared["stream_cap"] is None


def _plan(*extra: str) -> tuple[int, str]:
    argv = ["box", "--plan", *BOX, "--context", "2048", "--load", "4", "--slo-tpot-ms", "200"]
    result = CliRunner().invoke(app, [*argv, "--data-dir", str(ROOT / "data"), *extra])
    return result.exit_code, result.output


def test_box_plan_names_the_backend_it_priced_and_refuses_a_launch_it_cannot_serve(tmp_path):
    code, default = _plan()
    assert code == 0 and "--attention-backend triton" in default and "verify kernel serial" in default
    code, flashinfer = _plan("--attention-backend", "flashinfer")
    assert code == 0 and "--attention-backend flashinfer" in flashinfer
    code, vllm = _plan("--engine", "vllm")
    assert code == 0 and "no launch command: vLLM answers" in vllm and "sglang.launch_server" not in vllm
    assert "PCIe-IPC" not in vllm  # SGLang's all-reduce switch is no question for a vLLM answer
    code, split = _plan("--verify-kernel", "split-kv")
    assert code == 0 and "no launch command" in split and "patched SGLang" in split
    code, refused = _plan("--engine", "vllm", "--verify", str(tmp_path / "box.yaml"))
    assert code != 0 and "--engine vllm --verify" in refused
