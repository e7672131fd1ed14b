"""#53 class 8: `box --out` never writes into the run store (a stray page there would read as a run); the refusal
names the folder, and nothing is written."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from verifylab.cli import app

ROOT = Path(__file__).resolve().parents[2]
SHM = "20261201-091704-2xh200-probe-shm"


def test_box_out_inside_the_run_store_is_refused(tmp_path):
    data = tmp_path / "data"
    (data / "runs").mkdir(parents=True)
    shutil.copytree(ROOT / "data" / "runs" / SHM, data / "runs" / SHM)
    shutil.copytree(ROOT / "data" / "reference", data / "reference")
    before = sorted(p.name for p in (data / "runs").iterdir())
    out = data / "runs" / "my-box-page"
    args = ["box", "--probe", SHM, "--decode-tok-s", "60", "--data-dir", str(data), "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0 and "inside the data folder" in result.output, result.output
    assert sorted(p.name for p in (data / "runs").iterdir()) == before and not out.exists()
