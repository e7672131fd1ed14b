"""Issue 41 class 2 at the curve boundary (``model.comm_pass``): every row of a reader's curve is a point or the
file is refused naming the row; an impossible input is never priced (`model pass`, `model whatif`, `box`)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

HEADER = "path,impl,tokens,us\n"


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        ("shm,nccl,1,inf\n", "line 2: us = inf"),
        ("shm,nccl,1,30\nshm,nccl,16,-4\n", "line 3: us = -4"),
        ("shm,nccl,1,0.03\n", "in milliseconds"),
        ("shm,nccl,1,30\nshm,nccl,16,\n", "line 3: tokens and us must both be numbers"),
        ("shm,oneshot,1,30\n", "line 2: impl 'oneshot'"),
        ("shm,nccl,0,30\n", "line 2: message of 0"),
    ],
)
@pytest.mark.parametrize("command", ["pass", "whatif"])
def test_a_curve_row_that_cannot_be_a_latency_refuses_the_file(tmp_path, repo_root, monkeypatch, rows, words, command):
    monkeypatch.chdir(repo_root)
    curve = tmp_path / "curve.csv"
    curve.write_text(HEADER + rows)
    args = ["--compute-ms", "8", "--tokens", "16", "--path", "shm", "--norm-us", "3"] if command == "pass" else []
    result = CliRunner().invoke(app, ["model", command, "--latency", str(curve), *args])
    assert result.exit_code == 2 and words in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_path_the_curve_lacks_and_an_infinite_input_are_refused(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    curve = tmp_path / "curve.csv"
    curve.write_text(HEADER + "shm,nccl,1,30\nshm,nccl,4,34\nshm,nccl,16,40\n")
    base = ["model", "pass", "--tokens", "16", "--latency", str(curve), "--norm-us", "3", "--json"]
    lacks = CliRunner().invoke(app, [*base, "--compute-ms", "8", "--path", "p2p"])
    assert lacks.exit_code == 2 and "its paths: shm" in lacks.output
    infinite = CliRunner().invoke(app, [*base, "--compute-ms", "inf", "--path", "shm"])
    assert infinite.exit_code == 2 and "--compute-ms inf" in infinite.output
    good = CliRunner().invoke(app, [*base, "--compute-ms", "8", "--path", "shm"])
    assert good.exit_code == 0 and json.loads(good.output)["variants"][1]["pass_ms"] > 8


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        ("shm,nccl,1,30\nshm,nccl,16,40\n", "has 2 size(s); a curve needs at least 3"),
        ("shm,nccl,1,30\nshm,nccl,1,31\nshm,nccl,4,34\nshm,nccl,16,40\n", "twice: one row per size"),
        ("shm,nccl,1,30\nshm,nccl,4,3.4\nshm,nccl,16,40\n", "less than"),  # a value in the wrong unit or column
    ],
)
def test_a_curve_that_cannot_be_one_is_refused(tmp_path, repo_root, monkeypatch, rows, words):
    """#53 class 5: a one- or two-point curve, a size timed twice and a larger message much faster than a smaller
    one are refused, naming what is wrong."""
    monkeypatch.chdir(repo_root)
    curve = tmp_path / "curve.csv"
    curve.write_text(HEADER + rows)
    args = ["model", "pass", "--compute-ms", "8", "--tokens", "16", "--path", "shm", "--norm-us", "3"]
    result = CliRunner().invoke(app, [*args, "--latency", str(curve)])
    assert result.exit_code == 2 and words in result.output, result.output


def test_a_probe_of_another_size_of_group_prices_no_tp(tmp_path, repo_root, monkeypatch):
    """#53 class 5: `model speculation --tp 8 --latency RUN` with a two-rank probe is refused (its all-reduces are
    not an eight-rank group's), naming both sizes."""
    monkeypatch.chdir(repo_root)
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "hidden_size": 2048,
                "num_hidden_layers": 24,
                "num_attention_heads": 16,
                "num_key_value_heads": 8,
                "intermediate_size": 5632,
                "vocab_size": 32000,
            }
        )
    )
    args = ["model", "speculation", "--config", str(tmp_path), "--gpu", "h200", "--accept", "2"]
    result = CliRunner().invoke(app, [*args, "--tp", "8", "--latency", "20261201-092338-2xh200-probe-p2p"])
    assert result.exit_code == 2 and "measured 2 rank(s), not the 8 of --tp 8" in result.output, result.output


@pytest.mark.parametrize("rate", ["1e-300", "0.01", "1e6"])
def test_a_decode_rate_no_server_runs_at_is_refused(tmp_path, repo_root, monkeypatch, rate):
    """#53 class 5: `--decode-tok-s 1e-300` (a step of 10^297 s) is refused with its bounds, not priced."""
    monkeypatch.chdir(repo_root)
    result = CliRunner().invoke(app, ["model", "whatif", "--decode-tok-s", rate])
    assert result.exit_code == 2 and "one stream's plain decode rate in tok/s" in result.output, result.output


@pytest.mark.parametrize("header", ["a,b\n", "path,impl,tokens\n", "path,impl,size,us\n"])
def test_a_csv_without_the_curves_columns_says_which_it_needs(tmp_path, repo_root, monkeypatch, header):
    """It was read as nccl-tests' output and refused with "name its path with --path", which sent the reader to a
    flag that could not help."""
    monkeypatch.chdir(repo_root)
    curve = tmp_path / "curve.csv"
    curve.write_text(header + "shm,nccl,1,30\n")
    result = CliRunner().invoke(app, ["model", "whatif", "--latency", str(curve)])
    assert result.exit_code == 2 and "a CSV curve needs the columns path, impl, tokens, us" in result.output
    assert f"(it has {', '.join(header.strip().split(','))})" in " ".join(result.output.split()), result.output
