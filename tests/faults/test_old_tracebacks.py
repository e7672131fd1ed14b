"""#53 class 8, the five old tracebacks: a probe's samples stored as text, an odd group name (in the raw record and in
a stored latency table), a fleet state file that is a list or a string, `notebook` onto a folder — each one line
naming what is wrong, exit 1 or 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.errors import FleetError, ManifestError

PROBE = "20261201-092338-2xh200-probe-p2p"


@pytest.fixture
def probe_dir(repo_root: Path, tmp_path: Path) -> Path:
    shutil.copytree(repo_root / "data" / "runs" / PROBE, tmp_path / "runs" / PROBE)
    return tmp_path


def _tamper_raw(data_dir: Path, change) -> None:
    raw = data_dir / "runs" / PROBE / "probe_raw.json"
    record = json.loads(raw.read_text())
    change(record["ranks"][0]["cells"][0])
    raw.write_text(json.dumps(record))


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("samples_us", "12 13 14", "samples_us: a list of times in µs (numbers), not str"),
        ("samples_us", [12.0, "13"], "samples_us: a list of times in µs"),
        ("group", "pair:x-y", "group = 'pair:x-y'"),
        ("group", 7, "group = '7'"),
    ],
)
def test_a_tampered_raw_probe_record_is_one_line(probe_dir, field, value, said):
    _tamper_raw(probe_dir, lambda cell: cell.__setitem__(field, value))
    result = CliRunner().invoke(app, ["comm", "verdict", PROBE, "--data-dir", str(probe_dir)])
    assert result.exit_code == 1 and said in result.output and "Traceback" not in result.output, result.output
    assert not isinstance(result.exception, TypeError | ValueError)


def test_an_odd_group_in_a_stored_latency_table_is_named(probe_dir):
    from verifylab.comm.verdict import _group_latencies

    table = pd.read_csv(probe_dir / "runs" / PROBE / "allreduce_latency.csv")
    table.loc[0, ["group", "mode"]] = ["pair:a-b", "graph"]
    with pytest.raises(ManifestError, match="group 'pair:a-b' is not named as a probe names one"):
        _group_latencies(table, 4, "pair:", {0, 1})


@pytest.mark.parametrize("content", ["[1, 2]", '"jobs"', '{"jobs": {"a": 3}}'])
def test_a_fleet_state_file_that_is_not_a_table_is_one_line(tmp_path, content):
    from verifylab.fleet.state import CampaignState

    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "c.json").write_text(content)
    with pytest.raises(FleetError, match=r"unreadable campaign state .*move it away"):
        CampaignState(tmp_path, "c").read()


def test_notebook_onto_a_folder_is_one_line(repo_root, tmp_path):
    result = CliRunner().invoke(app, ["notebook", "02", str(tmp_path), "--root", str(repo_root)])
    assert result.exit_code != 0 and "must end in .ipynb" in result.output and result.exception is not None
    assert isinstance(result.exception, SystemExit)


def test_notebook_into_the_data_folder_is_refused_and_writes_nothing(repo_root, tmp_path):
    """`verifylab notebook 02 data/x.ipynb` wrote a notebook into the evidence folder (only the run store writes
    there); a folder named like a notebook is refused too, with a file name to give."""
    project = tmp_path / "p"
    shutil.copytree(repo_root / "notebooks", project / "notebooks")
    shutil.copy(repo_root / "_config.yml", project / "_config.yml")
    shutil.copytree(repo_root / "data" / "reference", project / "data" / "reference")
    (project / "data" / "runs").mkdir()
    before = sorted(p.relative_to(project) for p in (project / "data").rglob("*"))
    inside = CliRunner().invoke(app, ["notebook", "02", str(project / "data" / "x.ipynb"), "--root", str(project)])
    assert inside.exit_code == 1 and "inside the data folder" in inside.output, inside.output
    (tmp_path / "d.ipynb").mkdir()
    folder = CliRunner().invoke(app, ["notebook", "02", str(tmp_path / "d.ipynb"), "--root", str(project)])
    assert folder.exit_code == 2 and "a folder; give a file name" in " ".join(folder.output.split()), folder.output
    assert sorted(p.relative_to(project) for p in (project / "data").rglob("*")) == before
    fine = CliRunner().invoke(app, ["notebook", "02", str(tmp_path / "02.ipynb"), "--root", str(project)])
    assert fine.exit_code == 0 and (tmp_path / "02.ipynb").is_file(), fine.output


def test_synth_verify_traces_into_the_data_folder_or_onto_a_file_are_refused_first(tmp_path):
    """Its --profile-dir receives every rank's trace: never inside the data folder (only the run store writes there),
    never where a file is; refused before a rank starts."""
    data = tmp_path / "data"
    (data / "runs").mkdir(parents=True)
    (tmp_path / "taken").write_text("mine\n")
    base = ["synth-verify", "--backend", "gloo", "--ranks", "2", "--layers", "2", "--hidden", "16", "--data-dir",
            str(data)]  # fmt: skip
    for where, words in ((data / "runs" / "traces", "inside the data folder"), (tmp_path / "taken", "a file is there")):
        result = CliRunner().invoke(app, [*base, "--profile-dir", str(where)])
        assert result.exit_code != 0 and words in " ".join(result.output.split()), result.output
        assert isinstance(result.exception, SystemExit)
    assert not (data / "runs" / "traces").exists() and (tmp_path / "taken").read_text() == "mine\n"
