"""#53 class 8: Ctrl-C stops `verifylab book --force` as it stops `verifylab run`: the first press after the cells in
progress (no chapter starts after it), the second interrupts the running cell; exit 130, nothing rendered, and the
chapters executed before it are kept for the next build."""

from __future__ import annotations

import sys

import pytest

from ..procs import INTERRUPTIBLE_CLI, interrupt_after, with_a_slow_cell
from ..projects import project_copy

pytestmark = pytest.mark.slow  # starts a book build and interrupts it


@pytest.mark.parametrize(("presses", "sleep_s"), [(1, 4), (2, 120)])
def test_ctrl_c_stops_book_force(repo_root, tmp_path, presses, sleep_s):
    marker = tmp_path / "cell-started"
    root = with_a_slow_cell(project_copy(repo_root, tmp_path / "project"), marker, sleep_s)
    command = [sys.executable, "-c", INTERRUPTIBLE_CLI, "book", "--force", "--root", str(root)]
    code, output, took = interrupt_after(command, marker, presses)
    assert code == 130, output
    assert took < 60  # the second press did not wait out the 120 s cell
    assert "stopped: nothing rendered" in output and "Traceback" not in output
    assert not (root / "_build" / "html" / "index.html").exists()  # nothing rendered
    assert not (root / "book" / "_generated" / "01_environment_and_gates.ipynb").exists()  # cut short: not kept
