"""#27 item 10: killing `verifylab run` while it renders left `jupyter-book` running (it wrote `_build/html` ~20 s
later), and SIGINT left `_build/html` without `index.html`. The book is rendered into a folder of its own and
swapped in whole; the renderer dies with the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts and kills processes

FAKE_RENDERER = """
import os, sys, time
out = sys.argv[sys.argv.index("--path-output") + 1]
os.makedirs(os.path.join(out, "_build", "html"), exist_ok=True)
open(os.path.join(out, "_build", "html", "partial.html"), "w").write("half a book")
pid_file = sys.argv[2] + "/renderer.pid"  # argv: build ROOT ...
open(pid_file + ".tmp", "w").write(str(os.getpid()))
os.replace(pid_file + ".tmp", pid_file)  # whole when it appears: the test reads it as soon as it exists
time.sleep(60)
"""

RENDER = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as under a terminal, even when started in the background
from pathlib import Path
import verifylab.publish.html_render as html_render
html_render.jupyter_book_command = lambda: [sys.executable, sys.argv[2]]
html_render.render_html(Path(sys.argv[1]))
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").read_text().find("State:\\tZ") < 0 if Path(f"/proc/{pid}").exists() else False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_render_leaves_the_previous_book_and_no_renderer(tmp_path, sig):
    root = tmp_path / "project"
    (root / "_build" / "html").mkdir(parents=True)
    (root / "_build" / "html" / "index.html").write_text("the previous book")
    fake = tmp_path / "fake_jupyter_book.py"
    fake.write_text(FAKE_RENDERER)
    proc = subprocess.Popen([sys.executable, "-c", RENDER, str(root), str(fake)])
    pid_file = root / "renderer.pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    renderer = int(pid_file.read_text())
    os.kill(proc.pid, sig)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while alive(renderer) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(renderer), "the renderer outlived verifylab"
    assert (root / "_build" / "html" / "index.html").read_text() == "the previous book"
    assert not (root / "_build" / "html" / "partial.html").exists()
