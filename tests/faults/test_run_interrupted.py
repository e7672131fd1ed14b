"""Issue 41 class 4: Ctrl-C during `verifylab run` stops it: the first after the cell in progress (no chapter
starts after it), the second interrupts the running cell; it says what completed and how to resume, exit 130,
and renders nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

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
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN, str(params), str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.stdout else ""
        time.sleep(0.2)
    for _ in range(presses):
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(1)
    began = time.monotonic()
    output, _ = proc.communicate(timeout=90)
    assert proc.returncode == 130, output
    assert time.monotonic() - began < 60  # the second press did not wait out the 120 s cell
    assert "01_environment_and_gates: interrupted" in output
    resume = next(line for line in output.splitlines() if "Resume with:" in line)
    assert "verifylab run --params" in resume and "01" in resume.split("--only ")[1].split(",")
    assert not (root / "_build").exists()  # nothing rendered
