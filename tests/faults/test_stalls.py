"""A server that keeps the stream alive and sends no token (#17 item 12): `bench` and `sweep` share one stall
timeout counted on tokens, not bytes, so keep-alive comments do not hold either past it; the request fails
with one line saying so, exit 1, and the sweep's cell is left to be measured again."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.store.runs import RunStore

from ..test_bench import free_port

pytestmark = pytest.mark.slow

KEEPALIVE_SERVER = """
import asyncio, sys
from aiohttp import web

async def generate(request):
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    while True:  # comments only: bytes keep coming, tokens never do
        await resp.write(b": keep-alive\\n\\n")
        await asyncio.sleep(0.1)

app = web.Application()
app.router.add_post("/generate", generate)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""


@pytest.fixture(scope="module")
def keepalive_url():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", KEEPALIVE_SERVER, str(port)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


STALLED = "the server stalled (no token within 1 s)"


def test_bench_stops_at_the_stall_timeout_despite_keepalive_comments(keepalive_url):
    args = ["bench", "--url", keepalive_url, "--runs", "1", "--warmup", "0", "--max-tokens", "8"]
    out = CliRunner().invoke(app, [*args, "--stall-timeout", "1"])
    assert out.exit_code == 1, out.output
    errors = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and STALLED in errors[0] and "Traceback" not in out.output


def test_sweep_stops_at_the_same_stall_timeout_and_keeps_the_cell_to_measure_again(keepalive_url, tmp_path):
    run_id = "20261130-000000-keepalive"
    args = ["sweep", "--url", keepalive_url, "--concurrency", "1", "--max-tokens", "8", "--requests-per-cell", "1"]
    stored = ["--data-dir", str(tmp_path), "--run-id", run_id, "--label", "test double (not data)"]
    out = CliRunner().invoke(app, [*args, *stored, "--stall-timeout", "1"])
    assert out.exit_code == 1, out.output
    last = out.output.strip().splitlines()[-1]
    assert last.startswith("error: C=1: 1 of 1 requests failed") and STALLED in last
    assert RunStore(tmp_path / "runs").manifest(run_id).status == "partial"
