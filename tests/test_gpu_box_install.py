"""#43 item 2: the documented install on a GPU box (``install/gpu-box.sh``) puts verifylab and what rendering needs
beside the box's own stack without changing any of it, and ``pip check`` passes. Replayed in a fresh environment
that already holds a stand-in stack: SGLang, torch and FlashInfer as tiny wheels made here, pinning numpy and
pydantic below their newest releases as SGLang does."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # makes an environment and installs into it from the package index

STACK = {"torch": ("2.9.1", []), "flashinfer-python": ("0.6.4", []), "sglang": ("0.5.17", [])}
PINNED = {"numpy": "2.2.6", "pydantic": "2.10.6"}  # what the stand-in SGLang pins, older than the newest
STACK["sglang"] = ("0.5.17", [f"{n}=={v}" for n, v in PINNED.items()] + ["torch==2.9.1", "flashinfer-python==0.6.4"])


WHEEL = "Wheel-Version: 1.0\nGenerator: verifylab-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def stand_in_wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    """A pure-Python wheel of ``name`` that only declares its version and requirements."""
    module, dist = name.replace("-", "_"), f"{name.replace('-', '_')}-{version}"
    files = {
        f"{module}/__init__.py": f"__version__ = {version!r}  # a stand-in of the box's own {name}\n",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}.dist-info/WHEEL": WHEEL,
    }
    files[f"{dist}.dist-info/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{dist}.dist-info/RECORD,,\n"
    wheel = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def frozen(python: Path) -> dict[str, str]:
    out = subprocess.run([python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True)
    return dict(line.lower().split("==", 1) for line in out.stdout.splitlines() if "==" in line)


def box_with_stack(tmp_path: Path, extra_pins: list[str]) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A fresh environment holding the stand-in stack (and ``extra_pins``): its python, environ and freeze."""
    env_dir = tmp_path / "box"
    uv = Path(sys.executable).parent / "uv"
    # with pip, as a box's environment has it (uv seeds it from its cache: ensurepip took 4 CPU-s per environment)
    subprocess.run([uv, "venv", "-q", "--seed", "--python", sys.executable, env_dir], check=True)
    python = env_dir / "bin" / "python"
    wheels = [stand_in_wheel(tmp_path, name, version, requires) for name, (version, requires) in STACK.items()]
    environ = {**os.environ, "PATH": f"{uv.parent}:{os.environ['PATH']}"}
    pins = [f"{n}=={v}" for n, v in PINNED.items()] + extra_pins
    subprocess.run([uv, "pip", "install", "-q", "--python", python, *pins, *wheels], check=True, env=environ)
    return python, environ, frozen(python)


def install(python: Path, environ: dict[str, str], *options: str) -> subprocess.CompletedProcess:
    command = ["bash", str(ROOT / "install" / "gpu-box.sh"), *options, str(python), str(ROOT)]
    return subprocess.run(command, capture_output=True, text=True, env=environ)


def test_the_gpu_box_install_changes_nothing_of_the_box_and_pip_check_passes(tmp_path):
    python, environ, before = box_with_stack(tmp_path, [])
    result = install(python, environ)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    after = frozen(python)
    assert {name: after.get(name) for name in before} == before  # the stack, pins included, untouched
    assert {"verifylab", "papermill", "jupyter-book", "nbformat"} <= set(after)
    assert "No broken requirements found" in result.stdout


def test_an_install_that_would_change_the_box_fails_naming_the_package(tmp_path):
    """#54: one line names both sides — what verifylab needs and what the box pins — and the box-only install."""
    python, environ, before = box_with_stack(tmp_path, ["packaging==21.0"])  # verifylab needs packaging >= 23
    result = install(python, environ)
    assert result.returncode != 0 and "packaging" in result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "needs packaging>=" in last and "this box pins packaging==21.0" in last, last
    assert "nothing was changed" in last and "--box-only" in last, last
    assert frozen(python) == before  # refused: nothing changed


def test_a_box_only_install_leaves_the_rendering_stack_out(tmp_path):
    python, environ, before = box_with_stack(tmp_path, [])
    result = install(python, environ, "--box-only")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    after = frozen(python)
    assert {name: after.get(name) for name in before} == before
    assert "verifylab" in after and not {"jupyter-book", "papermill", "altair"} & set(after)
