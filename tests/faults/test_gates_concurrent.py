"""#27 item 12: two `gates apply` at once (5 of 26 trials ended in a traceback at b488f1d, the two applies'
writes interleaved). One apply or revert per tree at a time: the second is refused in one line, exit 1, and the
tree is left as the first one makes it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import verifylab.gates as gates
from verifylab.gates.lock import tree_lock

from ..test_gates import copy_of, pristine, tree_digest  # noqa: F401  (fixtures and helpers)

pytestmark = pytest.mark.slow  # starts processes

CLI = [sys.executable, "-m", "verifylab.cli", "gates"]


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_second_writer_is_refused_in_one_line_and_changes_nothing(copy_of, command):  # noqa: F811
    root = copy_of("sglang", "0.5.9")
    if command == "revert":
        gates.apply(root, "sm120")
    before = tree_digest(root)
    with tree_lock(root, "test"):  # another verifylab process in the middle of its apply
        proc = subprocess.run([*CLI, command, "--root", str(root)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "another verifylab process is applying or reverting" in lines[0], lines
    assert tree_digest(root) == before


def test_two_applies_started_together_leave_one_applied_tree(copy_of):  # noqa: F811
    root = copy_of("sglang", "0.5.9")
    before = tree_digest(root)
    for _ in range(2):
        procs = [
            subprocess.Popen([*CLI, "apply", "--root", str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(2)
        ]
        outs = [(p.wait(timeout=120), *(s.decode() for s in p.communicate())) for p in procs]
        assert all(code in (0, 1) and "Traceback" not in err for code, _, err in outs), outs
        assert gates.tree_state(root).state == "applied"
        gates.revert(root)
        assert tree_digest(root) == before
