"""#54: `synth-verify`, run exactly as its own help's example says (on CPU, gloo), ends cleanly: traces written,
the summary printed, exit 0 — no traceback after the work is done."""

from __future__ import annotations

import re
import shlex

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

pytestmark = pytest.mark.slow  # starts two gloo rank processes


def test_the_help_example_runs_to_a_clean_end(tmp_path):
    help_text = CliRunner().invoke(app, ["synth-verify", "--help"], terminal_width=400).output
    example = re.search(r"Example \(CPU, seconds\): `verifylab (synth-verify[^`]+)`", " ".join(help_text.split()))
    assert example, help_text
    args = shlex.split(example.group(1).replace("/tmp/synth", str(tmp_path / "synth")))
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output[-2000:]
    assert "Traceback" not in result.output and "verify_step" in result.output
    assert list((tmp_path / "synth").glob("synth-TP-*.trace.json.gz"))
