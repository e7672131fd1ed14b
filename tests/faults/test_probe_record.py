"""Issue 41 class 2 at the probe's raw record (``comm.probe.RawProbe.from_json``): impossible values in a stored
record are refused in one line by `comm verdict --write`, which then changes nothing; `--gpus` is checked before
anything is allocated."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

from ..test_fleet import ROOT

RUN = "20261201-091704-2xh200-probe-shm"


def _digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d["ranks"][0]["cells"][0].update(median_us=float("inf")), "median_us = inf"),
        (lambda d: d["ranks"][0]["cells"][0].update(median_us=-5.0), "median_us = -5.0"),
        (lambda d: d["ranks"][0]["cells"][0].update(tokens=-1), "tokens = -1"),
        (lambda d: d.update(world=0), "world = 0"),
        (lambda d: d.update(world=10**12), "world = 1000000000000"),
    ],
)
def test_a_tampered_raw_record_is_refused_and_the_run_is_unchanged(tmp_path, edit, words):
    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "data" / "runs" / RUN, runs / RUN)
    shutil.copytree(ROOT / "data" / "reference", tmp_path / "reference")
    raw = runs / RUN / "probe_raw.json"
    data = json.loads(raw.read_text())
    edit(data)
    raw.write_text(json.dumps(data))
    before = _digests(runs / RUN)
    result = CliRunner().invoke(app, ["comm", "verdict", RUN, "--write", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1 and words in result.output, result.output
    assert "healthy" not in result.output
    assert _digests(runs / RUN) == before


@pytest.mark.parametrize("gpus", ["100000000", "0", "0,5000", ",".join(["1"] * 2000)])
def test_gpus_out_of_range_is_refused_at_once(gpus):
    result = CliRunner().invoke(app, ["comm", "probe", "--gpus", gpus])
    assert result.exit_code == 2 and "--gpus" in result.output
