"""A dead server: a sweep's cells and a bench's runs whose requests failed are not results (#17 item 6): the
command exits 1 with one line saying which and why, the run stays partial, and a resume measures them again."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.store.runs import RunStore

from ..test_bench import free_port

pytestmark = pytest.mark.slow


def test_a_sweep_against_a_dead_server_fails_and_is_measured_again_on_resume(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    run_id = "20261130-000000-dead-server"
    args = ["sweep", "--url", url, "--concurrency", "1,2", "--max-tokens", "8", "--requests-per-cell", "2"]
    stored = ["--data-dir", str(tmp_path), "--run-id", run_id, "--label", "test double (not data)"]
    first = CliRunner().invoke(app, [*args, *stored])
    assert first.exit_code == 1, first.output
    line = first.output.strip().splitlines()[-1]
    assert line.startswith("error: C=1: 2 of 2 requests failed") and "measured again on resume" in line
    store = RunStore(tmp_path / "runs")
    assert store.manifest(run_id).status == "partial"  # never "complete" with failed cells
    again = CliRunner().invoke(app, [*args, *stored, "--json"])
    assert again.exit_code == 1
    assert json.loads(again.output.split("\nerror:")[0])["skipped_concurrency"] == []  # measured again


def test_a_bench_against_a_dead_server_is_one_line_and_exit_1(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    out = CliRunner().invoke(app, ["bench", "--url", url, "--runs", "2", "--warmup", "0", "--max-tokens", "8"])
    assert out.exit_code == 1, out.output
    assert out.output.strip().startswith(f"error: {url}/") and "cannot reach the server" in out.output  # one line
    assert "Traceback" not in out.output and "median 0.00" not in out.output


def test_a_cell_with_fewer_requests_than_streams_stores_its_effective_concurrency():
    from verifylab.bench.client import RequestResult
    from verifylab.bench.method import cell_summary

    results = [
        RequestResult(
            "p", "c", ok=True, output_tokens=8, ttft_s=0.01, e2e_s=0.1, chunk_times=[0.01, 0.1], chunk_tokens=[1, 7]
        )
        for _ in range(2)
    ]
    cell = cell_summary(results, 0.1, concurrency=16)
    assert (cell["concurrency"], cell["effective_concurrency"]) == (16, 2)
