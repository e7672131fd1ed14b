"""Issue 41 class 4: Ctrl-C during `verifylab run` stops it: the first after the cell in progress (no chapter
starts after it), the second interrupts the running cell; it says what completed and how to resume, exit 130,
and renders nothing."""

from __future__ import annotations

import sys

import pytest

from ..procs import interrupt_after
from ..projects import project_copy, write_params

pytestmark = pytest.mark.slow  # starts a run of chapters and interrupts it

RUN = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as under a terminal, even when started in the background
from verifylab.cli import app
sys.argv = ["verifylab", "run", "--params", sys.argv[1], "--root", sys.argv[2], "--no-render"]
app()
"""


@pytest.mark.parametrize(("presses", "sleep_s"), [(1, 4), (2, 120)])
def test_ctrl_c_stops_the_run_and_says_how_to_resume(repo_root, tmp_path, presses, sleep_s):
    root = project_copy(repo_root, tmp_path / "project")
    marker = tmp_path / "cell-started"
    with (root / "notebooks" / "01_environment_and_gates.py").open("a") as source:
        source.write(f"\n# %%\nimport pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep({sleep_s})\n")
    params = write_params(tmp_path / "params.yaml", {"mode": "replay"})
    code, output, took = interrupt_after([sys.executable, "-c", RUN, str(params), str(root)], marker, presses)
    assert code == 130, output
    assert took < 60  # the second press did not wait out the 120 s cell
    assert "01_environment_and_gates: interrupted" in output
    resume = next(line for line in output.splitlines() if "Resume with:" in line)
    assert "verifylab run --params" in resume and "01" in resume.split("--only ")[1].split(",")
    assert not (root / "_build").exists()  # nothing rendered
