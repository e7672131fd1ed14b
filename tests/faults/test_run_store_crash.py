"""The run store under two writers and under kill -9 at every write of a sweep cell (the test double
``verifylab.testing.faults --after-writes``): no table is lost, a cell is either stored whole (its requests and
its summary row) or measured again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from verifylab.bench.method import BenchRecorder
from verifylab.host import HostInfo
from verifylab.store.manifest import manifest_from_host
from verifylab.store.runs import RunStore

CRASHED = 137
RUN = "20261130-000000-faults"


def new_store(tmp_path: Path) -> RunStore:
    store = RunStore(tmp_path / "runs")
    host = HostInfo(host="test", os="Linux", python="3.12")
    store.create(manifest_from_host(RUN, "test double (not data)", host, {}, "fault test"))
    return store


WRITER = """
import sys
from pathlib import Path
import pandas as pd
from verifylab.store.runs import RunStore
store = RunStore(Path(sys.argv[1]))
for i in range(int(sys.argv[3])):
    variant = f"{sys.argv[4]}{i}"  # one declared table per variant: single-<variant>
    store.write_table(sys.argv[2], f"single-{variant}", pd.DataFrame({"variant": [variant]}), fmt="csv")
"""


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_two_processes_writing_one_run_lose_no_table(tmp_path):
    store = new_store(tmp_path)
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(store.root), RUN, "15", name]) for name in ("left", "right")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    tables = set(store.manifest(RUN).tables)
    assert tables == {f"single-{name}{i}" for name in ("left", "right") for i in range(15)}


CELL = """
import sys
from pathlib import Path
from verifylab.bench.client import RequestResult
from verifylab.bench.method import BenchRecorder
from verifylab.store.runs import RunStore
recorder = BenchRecorder(RunStore(Path(sys.argv[1])), sys.argv[2])
results = [RequestResult("p", "c", ok=True, output_tokens=8)]
recorder.save_cell("fusion", 2, results, {"concurrency": 2, "requests": 1, "failed": 0, "output_tokens_per_s": 99.0})
"""


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_kill_at_every_write_of_a_sweep_cell_never_leaves_a_cell_half_stored(tmp_path):
    for n in range(1, 20):
        store = new_store(tmp_path / str(n))
        recorder = BenchRecorder(store, RUN)
        faulty = [sys.executable, "-m", "verifylab.testing.faults", "--after-writes", str(n)]  # dies after write n
        proc = subprocess.run([*faulty, "-c", CELL, str(store.root), RUN], capture_output=True)
        assert proc.returncode in (0, CRASHED), proc.stderr
        stored = recorder.has_cell("fusion", 2)
        cells = store.table_or_none(RUN, "sweep_cells")
        if stored:  # whole: the requests table and the summary row
            assert store.read_table(RUN, recorder.cell_table("fusion", 2)).shape[0] == 1
            assert cells.loc[cells["concurrency"] == 2, "output_tokens_per_s"].tolist() == [99.0]
        else:  # not stored: the resume measures it again, and the new row replaces nothing twice
            recorder.save_cell(
                "fusion", 2, [], {"concurrency": 2, "requests": 0, "failed": 0, "output_tokens_per_s": 1.0}
            )
            cells = store.read_table(RUN, "sweep_cells")
            assert cells.loc[cells["concurrency"] == 2, "output_tokens_per_s"].tolist() == [1.0]
        assert not list(store.path(RUN).glob(".*.tmp"))
        if proc.returncode == 0:
            assert stored
            break
    else:
        raise AssertionError("the cell write never finished")
    assert n >= 3  # the walk went through the requests table, the manifest and the summary row
    assert isinstance(cells, pd.DataFrame)
