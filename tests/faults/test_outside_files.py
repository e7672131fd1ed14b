"""Issue 41 class 5 (reads before checks; reads outside the store), held at the one boundary every outside file
crosses (``verifylab.intake``): a FIFO, a device, a directory, an oversize file and a link out of a store are
refused in one line before a byte is read, and a file's content is never echoed."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.errors import ManifestError
from verifylab.intake import OutsideFileError, read_outside_bytes

from ..test_runs import make_store


def _fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (_fifo, "a FIFO"),
        (lambda tmp: tmp, "a directory"),
        (lambda tmp: __import__("pathlib").Path("/dev/zero"), "a device"),
        (lambda tmp: tmp / "absent", "no such"),
    ],
)
def test_what_is_not_a_regular_file_is_refused_before_reading(tmp_path, make, words):
    with pytest.raises(OutsideFileError, match=words) as err:
        read_outside_bytes(make(tmp_path), "parameters")
    assert len(str(err.value).splitlines()) == 1


def test_an_oversize_file_and_a_link_out_of_its_root_are_refused(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: 1\n" * 1000)
    with pytest.raises(OutsideFileError, match="more than a parameters file may hold"):
        read_outside_bytes(big, "parameters", limit=100)
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(big)
    with pytest.raises(OutsideFileError, match="out of"):
        read_outside_bytes(root / "link", "table", root=root)
    assert read_outside_bytes(root / "link", "parameters") == big.read_bytes()  # a user's own link is theirs


def test_a_parameters_file_is_never_echoed(tmp_path, monkeypatch, repo_root):
    monkeypatch.chdir(repo_root)
    secret = tmp_path / "not-params"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\nsecret-line-42\n")
    fifo = _fifo(tmp_path)
    for path, words in ((secret, "top level is a str"), (fifo, "a FIFO"), ("/dev/zero", "a device")):
        result = CliRunner().invoke(app, ["run", "--params", str(path)])
        assert result.exit_code == 2 and words in result.output, result.output
        assert "secret-line-42" not in result.output and "root:x" not in result.output


@pytest.mark.parametrize("value", [float("inf"), -3.0])
def test_a_stored_table_with_an_impossible_measurement_is_refused(tmp_path, value):
    store, manifest = make_store(tmp_path)
    store.write_table(
        manifest.run_id, "step_wall_time", pd.DataFrame({"rank": [0], "step": [1], "wall_ms": [0.5]}), fmt="csv"
    )
    path = store.path(manifest.run_id) / "step_wall_time.csv"
    path.write_text(f"rank,step,wall_ms\n0,1,0.5\n1,2,{value}\n")
    with pytest.raises(ManifestError, match=r"column 'wall_ms' row 2 .*finite and not negative"):
        store.read_table(manifest.run_id, "step_wall_time")


def test_a_probes_raw_record_linked_out_of_its_run_is_refused(tmp_path):
    from verifylab.comm.record import RAW_FILE, read_raw

    store, manifest = make_store(tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"secret": 1}))
    (store.path(manifest.run_id) / RAW_FILE).symlink_to(outside)
    with pytest.raises(ManifestError, match="out of"):
        read_raw(store, manifest.run_id)


def test_an_output_that_is_one_of_the_inputs_is_refused_before_reading(tmp_path):
    trace = tmp_path / "rank0.json"
    trace.write_text('{"traceEvents": []}')
    before = trace.read_bytes()
    for given in (trace, tmp_path):
        result = CliRunner().invoke(app, ["trace", "summarize", str(given), "--csv", str(trace)])
        assert result.exit_code == 1 and "that is an input" in result.output
    link = tmp_path / "link.csv"
    link.symlink_to(trace)
    result = CliRunner().invoke(app, ["trace", "summarize", str(trace), "--csv", str(link)])
    assert result.exit_code == 1 and "that is an input" in result.output
    assert trace.read_bytes() == before


def test_a_trace_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path):
    fifo = _fifo(tmp_path)
    for given, words in ((fifo, "a FIFO"), ("/dev/zero", "a device")):
        result = CliRunner().invoke(app, ["trace", "summarize", str(given)])
        assert result.exit_code == 1 and words in result.output, result.output
