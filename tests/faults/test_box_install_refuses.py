"""#53 class 2: the GPU-box install refuses before it changes anything — an interpreter verifylab does not support,
or an environment whose packages cannot be listed (no pip, no uv: nothing could be pinned) — naming why; it never
reaches an install command."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "install" / "gpu-box.sh"


def run(python: Path | str, tmp_path: Path) -> subprocess.CompletedProcess:
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}  # no uv on this PATH
    return subprocess.run(["bash", str(SCRIPT), str(python), str(ROOT)], capture_output=True, text=True, env=environ)


def test_an_interpreter_too_old_is_refused_before_anything_runs(tmp_path):
    calls = tmp_path / "calls"
    shim = tmp_path / "python3.10"
    shim.write_text(
        "#!/bin/bash\n"
        f'echo "$*" >> {calls}\n'
        'case "$*" in *"%d.%d"*) echo 3.10 ;; *version_info*) exit 1 ;; *) exit 0 ;; esac\n'
    )
    shim.chmod(0o755)
    result = run(shim, tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Python 3.10; verifylab needs 3.11" in result.stderr and "nothing was changed" in result.stderr
    assert "pip" not in calls.read_text()  # refused before it listed or installed anything


def test_an_environment_without_pip_or_uv_is_refused(tmp_path):
    env_dir = tmp_path / "uv-made"
    venv.EnvBuilder(with_pip=False).create(env_dir)  # what `uv venv` makes: no pip inside
    result = run(env_dir / "bin" / "python", tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no pip and uv is not on PATH" in result.stderr
    site = next((env_dir / "lib").glob("python*/site-packages"))
    assert not any("verifylab" in p.name for p in site.iterdir())


def _stand_ins(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose python3, python, pip and uv only record that they were called (issue 70)."""
    calls = tmp_path / "calls"
    calls.touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python3", "python", "pip", "pip3", "uv"):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/bash\necho "{name} $*" >> {calls}\necho 3.12\n')
        shim.chmod(0o755)
    environ = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    return environ, calls


@pytest.mark.parametrize(
    ("args", "code"),
    [([], 2), (["--help"], 0), (["-h"], 0), (["--box-only"], 2), (["--box-only", "--help"], 0), (["--box"], 2)],
    ids=["no argument", "--help", "-h", "--box-only alone", "--box-only --help", "unknown option"],
)
def test_without_its_interpreter_or_asked_for_help_it_changes_nothing(tmp_path, args, code):
    """Issue 70: with no PYTHON the script installed into the first python3 on PATH (twice, on a shared machine),
    and ``--help``/``-h`` were taken as interpreter names. Now: usage, and no interpreter, pip or uv is called."""
    environ, calls = _stand_ins(tmp_path)
    result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=environ)
    assert result.returncode == code, result.stdout + result.stderr
    assert "usage: bash install/gpu-box.sh [--box-only] PYTHON" in result.stdout + result.stderr
    assert calls.read_text() == ""  # nothing was called, so nothing was changed
    if code:
        assert "nothing was changed" in result.stderr
