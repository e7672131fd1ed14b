"""Running out of something is one line and nothing half-written (#17 item 13): a disk that fills up during a
write, and a sweep whose concurrency needs more sockets than the open-file limit allows."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from verifylab import iorw
from verifylab.cli import app
from verifylab.errors import StorageError
from verifylab.store.runs import RunStore

from ..test_bench import free_port


def _disk_full(monkeypatch) -> None:
    def no_room(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(iorw.os, "fsync", no_room)


def test_a_full_disk_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "table.csv"
    target.write_text("old\n")
    _disk_full(monkeypatch)
    try:
        iorw.atomic_write_text(target, "new\n")
    except StorageError as exc:
        message = str(exc)
        assert isinstance(exc, OSError)  # rollbacks that catch OSError still run
    assert message.startswith(f"cannot write {target}: No space left on device;") and "\n" not in message
    assert "MiB free there; nothing was replaced" in message
    assert target.read_text() == "old\n" and iorw.stray_temps(target) == []


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_a_full_disk_during_a_sweep_is_one_line_and_exit_1(tmp_path, monkeypatch):
    _disk_full(monkeypatch)
    url = f"http://127.0.0.1:{free_port()}"
    args = ["sweep", "--url", url, "--concurrency", "1", "--run-id", "20261130-000000-full", "--label", "disk full"]
    out = CliRunner().invoke(app, [*args, "--data-dir", str(tmp_path)])
    assert out.exit_code == 1 and "Traceback" not in out.output, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot write") and "No space left on device" in lines[0]
    assert RunStore(tmp_path / "runs").run_ids() == []  # no half-made run


def _sweep_with_open_files(limit: tuple[int, int], concurrency: int) -> subprocess.CompletedProcess:
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens: the sweep must stop before or at the first request
    return subprocess.run(
        [sys.executable, "-m", "verifylab.cli", "sweep", "--url", url, "--concurrency", str(concurrency)],
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, limit),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_a_concurrency_past_the_hard_open_file_limit_is_refused_before_any_request():
    done = _sweep_with_open_files((256, 256), 3000)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "concurrency 3000 needs about 3064 open files, and this process may open at most 256" in done.stderr
    assert "lower --concurrency or raise the hard limit" in done.stderr


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_a_soft_open_file_limit_is_raised_to_what_the_sweep_needs():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard == resource.RLIM_INFINITY or hard >= 564, f"this machine's hard limit {hard} is below 564"
    done = _sweep_with_open_files((256, hard), 500)  # needs about 564: more than the soft limit allows
    assert "open files" not in done.stderr  # the limit was raised: the sweep went on to the (absent) server
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
