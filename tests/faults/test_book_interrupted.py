"""#53 class 8: Ctrl-C stops `verifylab book --force` as it stops `verifylab run`: the first press after the cells in
progress (no chapter starts after it), the second interrupts the running cell; exit 130, nothing rendered, and the
chapters executed before it are kept for the next build."""

from __future__ import annotations

import sys

import pytest

from ..procs import interrupt_after
from ..projects import project_copy

pytestmark = pytest.mark.slow  # starts a book build and interrupts it

BOOK = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as under a terminal, even when started in the background
from verifylab.cli import app
sys.argv = ["verifylab", "book", "--force", "--root", sys.argv[1]]
app()
"""


@pytest.mark.parametrize(("presses", "sleep_s"), [(1, 4), (2, 120)])
def test_ctrl_c_stops_book_force(repo_root, tmp_path, presses, sleep_s):
    root = project_copy(repo_root, tmp_path / "project")
    marker = tmp_path / "cell-started"
    with (root / "notebooks" / "01_environment_and_gates.py").open("a") as source:
        source.write(f"\n# %%\nimport pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep({sleep_s})\n")
    code, output, took = interrupt_after([sys.executable, "-c", BOOK, str(root)], marker, presses)
    assert code == 130, output
    assert took < 60  # the second press did not wait out the 120 s cell
    assert "stopped: nothing rendered" in output and "Traceback" not in output
    assert not (root / "_build" / "html" / "index.html").exists()  # nothing rendered
    assert not (root / "book" / "_generated" / "01_environment_and_gates.ipynb").exists()  # cut short: not kept
