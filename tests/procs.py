"""The processes of this machine as tests look for leftovers (test helper, read from /proc)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every living process; zombies (already dead) are left out."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if fields[0] != "Z":
            found[int(stat.parent.name)] = (int(fields[1]), cmdline)
    return found


def descendants(pid: int) -> set[int]:
    """Every living process below ``pid``."""
    parents = {child: parent for child, (parent, _) in processes().items()}
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def interrupt_after(command: list[str], marker: Path, presses: int, deadline_s: float = 120) -> tuple[int, str, float]:
    """Start ``command`` in a session of its own, wait until ``marker`` exists (a cell it runs touched it), press
    Ctrl-C ``presses`` times, each after the command said what the one before did (its "Ctrl-C" line), as a user
    reads it before pressing again: two presses the process has not yet handled are one signal (the kernel keeps
    one pending SIGINT), and under load a second apart was not always enough; (exit code, output, seconds it took
    to end after the last press)."""
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    deadline = time.monotonic() + deadline_s
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.2)
    for press in range(1, presses + 1):
        os.killpg(proc.pid, signal.SIGINT)
        while press < presses and sum("Ctrl-C" in line for line in lines) < press:
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.1)
    began = time.monotonic()
    try:
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # leave nothing running; the test fails with what it printed
        raise AssertionError(f"still running 90 s after the last Ctrl-C:\n{''.join(lines)}") from None
    reader.join(timeout=30)
    return proc.returncode, "".join(lines), time.monotonic() - began


# A verifylab command started as a user's terminal would: SIGINT raises KeyboardInterrupt even in the background.
INTERRUPTIBLE_CLI = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from verifylab.cli import app
sys.argv = ["verifylab", *sys.argv[1:]]
app()
"""


def with_a_slow_cell(root: Path, marker: Path, sleep_s: float) -> Path:
    """``root``'s chapter 01 with a cell that touches ``marker`` and then sleeps ``sleep_s`` (a cell in progress to
    interrupt) right after its parameters: the press lands before the chapter's own cells and the next chapter
    run, which the run would execute for nothing; returns ``root``."""
    source = root / "notebooks" / "01_environment_and_gates.py"
    text = source.read_text(encoding="utf-8")
    parameters = text.index('# %% tags=["parameters"]')
    after = text.index("\n# %%", parameters + 1) + 1
    slow = f"# %%\nimport pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep({sleep_s})\n\n"
    source.write_text(text[:after] + slow + text[after:], encoding="utf-8")
    return root


def temporary_entries() -> set[Path]:
    """What the temporary folder (this session's, or this worker's) holds now."""
    import tempfile

    return set(Path(tempfile.gettempdir()).iterdir())


def clear_what_a_kill_left(before: set[Path], kinds: tuple[str, ...]) -> list[str]:
    """A process killed with -9 cannot remove its temporary files: each entry that appeared since ``before`` must be
    one of ``kinds`` (name prefixes, what the killed process would have removed); they are removed here, and their
    names returned. Anything else is left for the session's leftover check to name."""
    import shutil

    left = sorted(p for p in temporary_entries() - before if p.name.startswith(kinds))
    for path in left:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return [p.name for p in left]
