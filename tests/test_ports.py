"""The test servers' ports come from below the kernel's ephemeral range, a block per worker, each free when given."""

from __future__ import annotations

import itertools
import os
import socket

from .ports import WORKER_BLOCKS, ephemeral_low, free_port, worker_block


def test_a_port_is_below_the_ephemeral_range_in_this_workers_block_and_never_given_twice():
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    block = worker_block(os.environ.get("PYTEST_XDIST_WORKER"))
    assert all(p in block and p < ephemeral_low() for p in ports)


def test_workers_blocks_do_not_overlap_and_a_bad_range_file_reads_as_linux_default(tmp_path):
    blocks = [worker_block(f"gw{i}", 10000, 32768) for i in range(WORKER_BLOCKS)]
    assert all(a.stop <= b.start for a, b in itertools.pairwise(blocks))
    assert worker_block("gw8", 10000, 32768) == blocks[0] and worker_block(None, 10000, 32768) == blocks[0]
    (tmp_path / "range").write_text("not numbers\n")
    assert ephemeral_low(tmp_path / "range") == 32768
    (tmp_path / "range").write_text("40000\t60999\n")
    assert ephemeral_low(tmp_path / "range") == 40000


def test_a_port_something_listens_on_is_passed_over():
    taken = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        # the next port is one after `taken` in this process's order; hold it and the one after is given
        following = free_port()
        assert following != taken
        with socket.socket() as second:
            second.bind(("127.0.0.1", following + 1))
            second.listen()
            assert free_port() not in (taken, following + 1)
