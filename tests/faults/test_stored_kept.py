"""Issue 53 class 8 (data lost): a second `verifylab box --server` wrote its decode measurement over the one a run
already held (committed runs too). The boundary: the run store's ``upsert_rows`` keyed by the measurement's time,
so a measurement is added and the newest speaks."""

from __future__ import annotations

import shutil
from pathlib import Path

from verifylab.bench import decode_rate
from verifylab.cli import box as box_cli
from verifylab.model.answers.box_decision import stored_decode_rate
from verifylab.store.evidence import Evidence
from verifylab.store.runs import RunStore

ROOT = Path(__file__).resolve().parents[2]
PROBE = "20261201-092338-2xh200-probe-p2p"


def test_a_second_measurement_is_added_not_written_over(tmp_path, monkeypatch):
    (tmp_path / "runs").mkdir()
    shutil.copytree(ROOT / "data" / "runs" / PROBE, tmp_path / "runs" / PROBE)
    for tpot in (10.0, 20.0):
        rate = decode_rate.DecodeRate(1e3 / tpot, [tpot, tpot], "http://x", 8)
        monkeypatch.setattr(decode_rate, "measure_decode_rate", lambda url, r=rate: r)
        box_cli._measure_decode("http://x", PROBE, tmp_path)
    table = RunStore(tmp_path / "runs").read_table(PROBE, "box_decode")
    assert len(table) == 4 and table["measured_at"].nunique() == 2  # both kept
    rate, source = stored_decode_rate(Evidence(tmp_path).measured, PROBE)
    assert rate == 50.0 and " at " in source  # the newest speaks, and says when it was made
