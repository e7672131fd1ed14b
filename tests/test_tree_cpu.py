"""``benchmarks/tree_cpu.py``: the CPU of every process a command starts, an orphan's included (Chromium's PDF
renderers are orphaned before they end; `book_noop.py` and `suite_cpu.py` count theirs through it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BURN_S = 0.4  # the orphan's own CPU, spent in a loop that reads its own CPU clock

# A command whose child exits at once, leaving a grandchild (an orphan) that spends BURN_S of CPU and ends.
ORPHAN = f"""
import os, time
if os.fork() == 0:
    start = time.process_time()
    while time.process_time() - start < {BURN_S}:
        pass
    os._exit(0)
"""


def _counted(reaper: bool) -> float:
    """The CPU ``run_counted`` gives the command above, in a process of its own (a sub-reaper adopts every orphan
    of the process it is, so never the test worker)."""
    script = (
        "import sys\n"
        "from tree_cpu import become_subreaper, run_counted\n"
        f"{'become_subreaper()' if reaper else ''}\n"
        f"code, wall, cpu, _ = run_counted([sys.executable, '-c', {ORPHAN!r}])\n"
        "print(code, cpu)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "benchmarks")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    code, cpu = done.stdout.split()
    assert code == "0"
    return float(cpu)


def test_an_orphans_cpu_is_counted_only_by_its_sub_reaper():
    assert _counted(reaper=True) >= BURN_S  # the orphan ended as the measuring process's child
    assert _counted(reaper=False) < BURN_S  # re-parented elsewhere: its CPU never reaches the measure
