"""Names that would collide or be refused are refused before anything is measured (#17 item 5): table names are
never truncated (C=2 overwrote C=1), and a variant with a space no longer runs the benchmark first."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from verifylab.bench.method import BenchRecorder
from verifylab.cli import app
from verifylab.errors import ParameterError

from ..test_bench import free_port


def test_long_variant_names_are_refused_not_truncated_into_a_collision():
    long = "v" * 58  # sweep-<58>-c1 and -c2 cut at 64 characters were the same table
    assert BenchRecorder.cell_table(long, 1) != BenchRecorder.cell_table(long, 2)
    with pytest.raises(ParameterError, match=r"variant 'v{58}': it would store tables named 'single-v{58}"):
        BenchRecorder.check_names(long, [1, 2])
    BenchRecorder.check_names("eagle3_fusion", [1, 2, 64])  # the shipped names pass


def test_a_variant_with_a_space_is_refused_before_any_request(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: a measurement would fail differently
    args = ["sweep", "--url", url, "--concurrency", "1", "--variant", "my variant"]
    out = CliRunner().invoke(
        app,
        [*args, "--run-id", "20261130-000000-names", "--label", "test double (not data)", "--data-dir", str(tmp_path)],
    )
    assert out.exit_code == 2, out.output
    assert "variant 'my variant'" in out.output and "cannot reach" not in out.output
    assert not (tmp_path / "runs").exists()  # refused before the run was opened: nothing written
