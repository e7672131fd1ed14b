"""A chapter's kernel writes its own log (the kernel process's stdout and stderr: ipykernel's housekeeping, such as
the traceback of its shutdown race after a Ctrl-C) to a file, never to the user's terminal; a chapter whose kernel
dies reports that, with the end of the log, instead of ending the build in a traceback."""

from __future__ import annotations

import pytest

# The kernel process's own stderr, as a cell reaches it: ipykernel gives a cell's sys.stderr the process's stream
# as its fileno() (what a subprocess inherits, where ipykernel logs); under pytest it swaps no descriptor (fd 2)
OWN_STDERR = "try:\n    fd = sys.stderr.fileno()\nexcept Exception:\n    fd = 2\n"


def _chapter(tmp_path, name: str, body: str):
    source = tmp_path / f"{name}.py"
    source.write_text(f"# %%\nimport os, sys\n{OWN_STDERR}{body}\n\n# %%\n1 + 1\n", encoding="utf-8")
    return source


@pytest.mark.slow  # starts a kernel
def test_the_kernels_own_output_stays_off_the_terminal(tmp_path, capfd):
    from verifylab.publish.build import execute_chapter

    source = _chapter(tmp_path, "noisy", "os.write(fd, b'kernel-housekeeping\\n')")
    result = execute_chapter(source, tmp_path / "out" / "noisy.ipynb", {}, tmp_path)
    assert result.ok, result.error
    assert "kernel-housekeeping" not in capfd.readouterr().err


@pytest.mark.slow  # starts a kernel
def test_a_dead_kernel_is_a_failed_chapter_with_its_last_words(tmp_path):
    from verifylab.publish.build import execute_chapter

    source = _chapter(tmp_path, "dies", "os.write(fd, b'last-words token=abc123\\n'); os._exit(3)")
    result = execute_chapter(source, tmp_path / "out" / "dies.ipynb", {"api_key": "abc123"}, tmp_path)
    assert not result.ok and not result.interrupted
    assert result.error is not None
    assert result.error.startswith("the kernel died (DeadKernelError") and "\n" not in result.error
    assert "last-words" in result.kernel_log
    assert "abc123" not in result.kernel_log  # the chapter's credentials are scrubbed from the log too
    assert not (tmp_path / "out" / "dies.ipynb").exists()


@pytest.mark.slow  # starts a kernel
def test_book_says_which_chapter_lost_its_kernel_and_what_it_logged(repo_root, tmp_path):
    import subprocess
    import sys

    from ..projects import project_copy

    root = project_copy(repo_root, tmp_path / "project")
    source = root / "notebooks" / "01_environment_and_gates.py"
    text = source.read_text(encoding="utf-8")
    after = text.index("\n# %%", text.index('# %% tags=["parameters"]') + 1) + 1
    dying = f"# %%\nimport os, sys\n{OWN_STDERR}os.write(fd, b'segfault-ish last words\\n')\nos._exit(11)\n\n"
    source.write_text(text[:after] + dying + text[after:], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "verifylab.cli", "book", "--force", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "chapter 01_environment_and_gates failed: the kernel died" in output, output
    assert "segfault-ish last words" in output and "Traceback" not in output
    assert not (root / "_build" / "html" / "index.html").exists()


def test_a_new_kernel_forgets_the_log_of_the_kernel_before_it():
    """A kernel that dies before its cleanup runs (it never started) must not report the log of the chapter this
    thread ran before."""
    import shutil
    import threading

    from verifylab.publish import interrupt, ipc_kernel

    ipc_kernel._last_words[threading.get_ident()] = "the chapter before's housekeeping"
    manager = ipc_kernel.IpcKernelManager(kernel_name="python3")
    try:
        assert ipc_kernel.last_kernel_log() == ""
    finally:
        interrupt.CURRENT.drop_kernel(manager)
        shutil.rmtree(manager._sockets, ignore_errors=True)
