"""Issue 41 class 6: text from outside (NCCL's log, a server's log) is parsed in time linear in its length: a
20 MB line of the characters that made the old patterns backtrack is read in seconds, and a real line still
parses."""

from __future__ import annotations

import time

import pytest

from verifylab.comm.nccl_log import parse_nccl_log
from verifylab.server.server_log import classify_failure, fusion_in_effect, last_error_line, pcie_ipc_in_effect

pytestmark = pytest.mark.slow  # reads 80 MB of hostile text

REAL = "box:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"


@pytest.mark.parametrize("fill", ["a", "0", "0 coll channels, ", "Channel 0 : ", "PCIe-IPC workspace (max_numel=1"])
def test_a_20_mb_line_is_read_in_seconds(fill):
    line = "x:1:2 [0] NCCL INFO " + fill * (20_000_000 // len(fill))
    began = time.monotonic()
    log = parse_nccl_log(f"{line}\n{REAL}\n")
    classify_failure(line), last_error_line(line), fusion_in_effect(line), pcie_ipc_in_effect(line)
    assert time.monotonic() - began < 10  # behaviour: it ends; quadratic parsing took hours at this size
    assert log.long_lines == 1 and [e.via for e in log.edges] == ["P2P/CUMEM/read"]
