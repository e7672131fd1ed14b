"""Issue 41 class 4: Ctrl-C during `verifylab run` stops it: the first after the cell in progress (no chapter
starts after it), the second interrupts the running cell; it says what completed and how to resume, exit 130,
and renders nothing."""

from __future__ import annotations

import sys

import pytest

from ..procs import INTERRUPTIBLE_CLI, interrupt_after, with_a_slow_cell
from ..projects import project_copy, write_params

pytestmark = pytest.mark.slow  # starts a run of chapters and interrupts it


@pytest.mark.parametrize(("presses", "sleep_s"), [(1, 4), (2, 120)])
def test_ctrl_c_stops_the_run_and_says_how_to_resume(repo_root, tmp_path, presses, sleep_s):
    marker = tmp_path / "cell-started"
    root = with_a_slow_cell(project_copy(repo_root, tmp_path / "project"), marker, sleep_s)
    params = write_params(tmp_path / "params.yaml", {"mode": "replay"})
    run = ["run", "--params", str(params), "--root", str(root), "--no-render"]
    command = [sys.executable, "-c", INTERRUPTIBLE_CLI, *run]
    code, output, took = interrupt_after(command, marker, presses)
    assert code == 130, output
    assert took < 60  # the second press did not wait out the 120 s cell
    assert "01_environment_and_gates: interrupted" in output
    resume = next(line for line in output.splitlines() if "Resume with:" in line)
    assert "verifylab run --params" in resume and "01" in resume.split("--only ")[1].split(",")
    assert not (root / "_build").exists()  # nothing rendered
