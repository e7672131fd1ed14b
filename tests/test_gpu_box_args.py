"""#77: install/gpu-box.sh reads its options anywhere on the line: ``PY SRC --box-only`` keeps the flag (it was
dropped, installing the book stack), ``PY -h`` prints its help and changes nothing, and anything else is refused
before anything runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MISSING = "/nonexistent/python-for-gpu-box-test"


def _script(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "install" / "gpu-box.sh"), *argv], capture_output=True, text=True)


def test_help_anywhere_changes_nothing():
    for argv in (("-h",), (MISSING, "-h"), (MISSING, str(ROOT), "--help")):
        done = _script(*argv)
        assert done.returncode == 0 and done.stdout.startswith("usage:"), argv


def test_a_trailing_box_only_is_an_option_not_a_path():
    for argv in ((MISSING, str(ROOT), "--box-only"), ("--box-only", MISSING, str(ROOT)), (MISSING, "--box-only")):
        done = _script(*argv)  # parsed: it reaches the interpreter check, which refuses the missing PYTHON
        assert done.returncode == 2 and f"no interpreter {MISSING}" in done.stderr, (argv, done.stderr)


def test_unknown_options_and_extra_arguments_are_refused():
    assert "unknown option --book" in _script(MISSING, "--book").stderr
    assert "at most PYTHON and VERIFYLAB_SOURCE" in _script(MISSING, str(ROOT), "extra").stderr
    assert "PYTHON is required" in _script("--box-only").stderr
