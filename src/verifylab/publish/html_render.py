"""The book's HTML from the executed chapters: ``jupyter-book build`` into a fresh folder beside ``_build``, swapped in
only when whole (an interrupted or failed render leaves the previous book as it was)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from verifylab.errors import BookBuildError
from verifylab.lifetime import run_tied
from verifylab.publish.paths import GENERATED
from verifylab.publish.run_pages import INDEX as RUNS_INDEX
from verifylab.publish.run_pages import RUNS_FOLDER
from verifylab.publish.toc import write_toc


def jupyter_book_command() -> list[str]:
    """The ``jupyter-book`` beside this Python (the project's .venv), else the one on PATH."""
    exe = Path(sys.executable).with_name("jupyter-book")
    return [str(exe) if exe.exists() else "jupyter-book"]


RENDER_TIMEOUT_S = 1800  # the HTML render of this book takes under a minute; half an hour means it hangs


def render_html(root: Path, strict: bool = True) -> Path:
    """Run ``jupyter-book build`` on the project root; returns ``_build/html/index.html``.

    It renders into a fresh folder (Sphinx never deletes stale pages) beside ``_build``, swapped in only when
    whole: an interrupted render (Ctrl-C, SIGTERM, kill -9) leaves the previous ``_build/html`` as it was, and
    ``jupyter-book`` dies with this process instead of writing a build folder later."""
    build = root / "_build"
    build.mkdir(parents=True, exist_ok=True)
    for stale in [*build.glob(".render-*"), *build.glob(".html-old-*")]:  # what a killed render left
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=".render-", dir=build))
    try:
        runs = sorted(p.stem for p in (root / GENERATED / RUNS_FOLDER).glob("*.md") if p.stem != RUNS_INDEX)
        toc = write_toc(root, runs)  # the root's _toc.yml, from the chapter registry and the run pages written
        cmd = [*jupyter_book_command(), "build", str(root), "--quiet", "--path-output", str(staging), "--toc", str(toc)]
        if strict:
            cmd += ["--warningiserror", "--keep-going"]
        proc = run_tied(cmd, timeout_s=RENDER_TIMEOUT_S, cwd=root)
        if proc is None:
            raise BookBuildError(
                f"jupyter-book build took longer than {RENDER_TIMEOUT_S} s and was stopped (the previous book is kept)"
            )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
            raise BookBuildError(f"jupyter-book build failed (exit {proc.returncode}):\n{tail}")
        rendered = staging / "_build" / "html"
        if not (rendered / "index.html").is_file():
            raise BookBuildError(f"jupyter-book build succeeded but {rendered / 'index.html'} is missing")
        _swap_in(rendered, build / "html")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return build / "html" / "index.html"


def _swap_in(rendered: Path, target: Path) -> None:
    """``rendered`` becomes ``target``: the old folder is moved aside first and removed after (two renames)."""
    old = target.with_name(f".{target.name}-old-{os.getpid()}")
    if target.exists():
        os.replace(target, old)
    os.replace(rendered, target)
    shutil.rmtree(old, ignore_errors=True)
