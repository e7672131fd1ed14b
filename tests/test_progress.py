"""Long waits say what they are waiting for (#17 item 16): a server start-up reports its seconds and the last
line of its log; a trace read reports bytes (tests/faults/test_trace_inputs.py); a chapter reports its cells
(tests/test_params_and_book.py)."""

from __future__ import annotations

import sys

import pytest

from verifylab.server.launch import Server

from .test_bench import free_port


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_a_server_start_reports_the_wait_and_what_the_log_says(tmp_path):
    port = free_port()
    launcher = [sys.executable, "-m", "verifylab.testing.server", "--port", str(port)]
    cmd = [*launcher, "--log-line", "Load weight begin. api_key=sk-secret123", "--startup-ms", "800"]
    server = Server(cmd, "127.0.0.1", port, tmp_path / "server.log")
    heard: list[tuple[float, str]] = []
    try:
        server.start(health_timeout_s=60, on_wait=lambda seconds, line: heard.append((seconds, line)))
    finally:
        server.stop()
    seconds = [s for s, _ in heard]
    assert len(heard) >= 3 and seconds == sorted(seconds) and seconds[-1] >= 0.8
    lines = {line for _, line in heard if line}
    assert any(line.startswith("Load weight begin.") for line in lines)
    assert not any("sk-secret123" in line for line in lines)  # shown redacted, as the stored log is
