"""#53 class 2: the GPU-box install refuses before it changes anything — an interpreter verifylab does not support,
or an environment whose packages cannot be listed (no pip, no uv: nothing could be pinned) — naming why; it never
reaches an install command."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

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
