"""Issue 70, migrations: what ``runs migrate`` (and every reader of a manifest) cannot read is refused in one line
naming the file, and the run is left as it was. At 7ac0507 a ``"2"`` schema string, a cut ``probe_raw.json`` and a
deeply nested one ended in tracebacks. The boundaries: ``store.manifest.Manifest`` (a schema is a whole number, never
a text guessed into one) and ``store.migrations._read_probe_record`` (bounded, parsed, depth-checked)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

RUN = "20261201-092338-2xh200-probe-p2p"  # a stored probe: it has a probe_raw.json
DATA = Path(__file__).resolve().parents[2] / "data"


def _schema_2_run(tmp_path: Path, schema: object = 2) -> Path:
    folder = tmp_path / "data" / "runs" / RUN
    shutil.copytree(DATA / "runs" / RUN, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["schema_version"] = schema
    manifest["versions"] |= {"nccl": None, "verifylab": None}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def _migrate(tmp_path: Path):
    return CliRunner().invoke(app, ["runs", "migrate", "--data-dir", str(tmp_path / "data")])


def _one_line_error(result, *words: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert all(w in result.output for w in words), result.output
    assert len(result.output.strip().splitlines()) <= 3, result.output  # one line (a long one wraps)


@pytest.mark.parametrize("schema", ["2", 2.0, True, "two"], ids=["text 2", "float 2.0", "true", "text two"])
def test_a_schema_that_is_not_a_whole_number_is_refused_naming_the_field(tmp_path, schema):
    _schema_2_run(tmp_path, schema)
    listed = CliRunner().invoke(app, ["runs", "list", "--data-dir", str(tmp_path / "data")])
    assert listed.exit_code == 1 and (listed.exception is None or isinstance(listed.exception, SystemExit))
    assert "unreadable" in listed.output and "schema_version" in listed.output  # listed, the field named
    _one_line_error(_migrate(tmp_path), "schema_version", "manifest.json")


RECORDS = {
    "cut": lambda text: text[: len(text) // 2],
    "nested 100,000 deep": lambda text: "[" * 100_000 + "]" * 100_000,
    # held out: a record written by another tool, bytes that are not UTF-8, a dict nested just past the parser
    "not UTF-8": lambda text: text.encode().replace(b"{", b"\xff{", 1),
    "objects 5,000 deep": lambda text: '{"a":' * 5_000 + "1" + "}" * 5_000,
}


@pytest.mark.parametrize("case", list(RECORDS))
def test_a_probe_record_that_cannot_be_read_is_one_line_and_the_run_is_untouched(tmp_path, case):
    folder = _schema_2_run(tmp_path)
    raw = folder / "probe_raw.json"
    broken = RECORDS[case](raw.read_text(encoding="utf-8"))
    raw.write_bytes(broken if isinstance(broken, bytes) else broken.encode())

    def files() -> dict[str, bytes]:  # the run's files (the lock a writer holds aside)
        return {p.name: p.read_bytes() for p in folder.iterdir() if p.name != ".verifylab.lock"}

    before = files()
    _one_line_error(_migrate(tmp_path), "probe_raw.json", "not migrated")
    assert files() == before


def test_a_whole_schema_2_run_still_migrates(tmp_path):
    folder = _schema_2_run(tmp_path)
    result = _migrate(tmp_path)
    assert result.exit_code == 0 and "1 run(s) migrated" in result.output, result.output
    assert json.loads((folder / "manifest.json").read_text())["schema_version"] >= 3
