"""What a command prints of free text (a run's label, a server's or gloo's error, a gate's expression) is text, never
rich markup: "[/src/gloo/...:78]" printed a traceback (a closing tag matching nothing) and "[bold]" vanished; and a
table's cell without a value reads as the book's dash, not "None" or "nan"."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.cli._shared import MISSING, print_frame, table_cell

ROOT = Path(__file__).resolve().parents[1]
MARKUP_LIKE = "8x RTX [/src/gloo/x.cc:78] [bold]PCIe[/bold]"


def test_a_cell_without_a_value_is_a_dash_and_a_whole_float_its_integer():
    cells = [None, math.nan, pd.NA, pd.NaT, 16.0, 2.5, 0.0, "nan-free", 3]
    assert [table_cell(v) for v in cells] == [MISSING, MISSING, MISSING, MISSING, "16", "2.5", "0", "nan-free", "3"]


def test_a_table_prints_markup_like_text_as_written(capsys):
    print_frame(pd.DataFrame({"label [/x]": [MARKUP_LIKE], "tok/s": [math.nan]}), title="runs in [/tmp/x]")
    printed = capsys.readouterr().out
    assert MARKUP_LIKE in printed and "label [/x]" in printed and "runs in [/tmp/x]" in printed
    assert "nan" not in printed and MISSING in printed


def test_a_runs_label_that_reads_as_markup_is_listed_as_written(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(ROOT / "data" / "runs", data / "runs")
    manifest = next((data / "runs").glob("*/manifest.json"))
    payload = json.loads(manifest.read_text(encoding="utf-8"))
    payload["label"] = "[/x] [bold]b[/bold]"  # short: the label column folds a long one
    manifest.write_text(json.dumps(payload), encoding="utf-8")
    result = CliRunner().invoke(app, ["runs", "list", "--wide", "--data-dir", str(data)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "[/x] [bold]b[/bold]" in result.output


def test_an_error_that_quotes_a_url_prints_no_credential():
    """`bench` at a server it cannot reach said "error: http://user:secret@...: cannot reach the server": every error a
    command prints passes the one secret policy."""
    result = CliRunner().invoke(app, ["bench", "--url", "http://user:s3cr3t@127.0.0.1:9/?api_key=k3y"])
    assert result.exit_code != 0 and "cannot reach the server" in result.output, result.output
    assert "s3cr3t" not in result.output and "k3y" not in result.output and "user:<redacted>@" in result.output


def test_the_wait_for_a_server_shows_its_log_line_without_its_api_key():
    """While SGLang starts, the spinner shows its log's last line: SGLang logs its arguments, the API key among them."""
    from verifylab.cli.bench import _show_wait

    shown: list[str] = []

    class Status:
        def update(self, text: str) -> None:
            shown.append(text)

    _show_wait(Status(), "baseline")(
        12.0, "server_args=ServerArgs(model_path='/m', api_key='k3y-v4lue-0123', port=30000)"
    )
    assert shown and "k3y-v4lue" not in shown[0] and "port=30000)" in shown[0]
