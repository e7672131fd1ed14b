"""Errors are printed as text, not rich markup (#17 item 14): brackets in a message (a failure name such as
[cuda_oom], a regular expression, a path) reach the reader intact; a failure while working exits 1, a wrong
parameter 2 (click's usage error)."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from verifylab.cli import app

from ..projects import project_copy


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_brackets_in_an_error_survive_and_a_runtime_failure_exits_1(tmp_path):
    folder = tmp_path / "[cuda_oom] capture"
    out = CliRunner().invoke(app, ["trace", "summarize", str(folder)])
    assert out.exit_code == 1, out.output
    assert error_lines(out.output) == [f"error: {folder}: no such file or folder"]


def test_a_regular_expression_in_an_error_is_shown_whole(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}')
    out = CliRunner().invoke(app, ["trace", "summarize", str(trace), "--step-marker", "step[A-Z"])
    assert out.exit_code == 1, out.output
    (line,) = error_lines(out.output)
    assert "--step-marker 'step[A-Z' is not a valid regular expression" in line


def test_a_misspelt_chapter_in_params_is_one_line_exit_2_and_runs_nothing(repo_root, tmp_path):
    root = project_copy(repo_root, tmp_path / "p")
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"mode": "replay", "chapters": {"03_verify_breakdwn": {}}}))
    out = CliRunner().invoke(app, ["run", "--params", str(params), "--root", str(root), "--no-render"])
    assert out.exit_code == 2, out.output
    (line,) = error_lines(out.output)
    assert "03_verify_breakdwn" in line and "Traceback" not in out.output
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before  # nothing run, nothing written
