"""#82: a call outside ``make`` reuses the bytecode ``make`` compiled: the venv's own interpreter keeps its bytecode in
the prefix ``install/pycache_prefix.py`` writes into the venv (a ``.pth``), unless the environment names another."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _prefix_of(python: Path, env: dict[str, str]) -> str:
    done = subprocess.run([str(python), "-c", "import sys; print(sys.pycache_prefix)"], env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def test_every_interpreter_of_the_venv_keeps_bytecode_in_its_prefix(tmp_path):
    venv.EnvBuilder(with_pip=False).create(tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    assert _prefix_of(python, env) == "None"  # a bare venv: bytecode beside the sources
    subprocess.run([str(python), str(ROOT / "install" / "pycache_prefix.py"), str(tmp_path / "pycache")], check=True,
                   capture_output=True)  # fmt: skip
    assert _prefix_of(python, env) == str((tmp_path / "pycache").resolve())
    assert _prefix_of(python, {**env, "PYTHONPYCACHEPREFIX": str(tmp_path / "mine")}) == str(tmp_path / "mine")
