"""Ports for the test servers that no other process can be handed while a test waits to bind them.

A port found by binding port 0 is drawn from the kernel's ephemeral range; once that socket closes, any process that
binds port 0 or opens a connection (another test's server, a chapter's kernel, Ray, a rank's rendezvous) can be given
the same port before the test's server binds it, and the server refuses to start ("port ... is in use"; seen under
load). The kernel hands out nothing below that range unasked, so the ports here come from below it: a block of its
own for each xdist worker, each port checked free by binding it, and none handed out twice by one process."""

from __future__ import annotations

import itertools
import os
import random
import socket
from collections.abc import Iterator
from pathlib import Path

LOWEST = 10000  # below: ports services are configured on
WORKER_BLOCKS = 8  # blocks the range is split into: one per xdist worker (gw0 .. gw7; more share)
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_low(path: Path = EPHEMERAL_RANGE) -> int:
    """The lowest port the kernel hands out unasked (Linux's default 32768 where it cannot be read)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def worker_block(worker: str | None, low: int = LOWEST, high: int | None = None) -> range:
    """This xdist worker's block (``gw3`` -> the fourth) of the ports from ``low`` to below the ephemeral range."""
    high = ephemeral_low() if high is None else high
    size = (high - low) // WORKER_BLOCKS
    index = int(worker[2:]) % WORKER_BLOCKS if worker and worker.startswith("gw") and worker[2:].isdigit() else 0
    return range(low + index * size, low + (index + 1) * size)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _candidates() -> Iterator[int]:
    """This process's ports: its worker's block from a place of its own (a nested session shares a worker's name)."""
    block = worker_block(os.environ.get("PYTEST_XDIST_WORKER"))
    if len(block) < 64:  # an ephemeral range that starts low: the kernel's port 0, as before
        while True:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                yield sock.getsockname()[1]
    start = random.Random(os.getpid()).randrange(len(block))
    for i in itertools.count():
        yield block[(start + i) % len(block)]


_PORTS = _candidates()


def free_port() -> int:
    """A port free now that neither the kernel nor this process will hand to anything else."""
    for _ in range(1000):
        port = next(_PORTS)
        if _bindable(port):
            return port
    raise RuntimeError("no free port in this worker's block")
