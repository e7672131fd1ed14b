"""Issue 70, CSVs: every CSV verifylab writes goes through the one cell function (``verifylab.csv_cells``), so text
from a trace, a wheel or a label never runs as a spreadsheet formula; and what verifylab writes it reads back whole.
At 7ac0507 ``trace summarize --csv`` wrote ``=HYPERLINK(`` cells as they came (the book's exports were already
neutral)."""

from __future__ import annotations

import csv
import io
import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from verifylab.cli import app

from ..tracefactory import event, write_trace

# the payload first, then held-out ones: another formula start, a DDE call, a cell that starts with a quote
PAYLOADS = ['=HYPERLINK("http://evil.example","open")', "@SUM(1+1)", "+cmd|' /C calc'!A0", "-2+3+cmd|x"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_trace_summarize_csv_neutralises_a_marker_that_is_a_formula(tmp_path, payload):
    events = []
    for i in range(3):
        t = i * 1000.0
        events.append(event(f"{payload}#{i}", "gpu_user_annotation", t, 500, tid=7))
        events.append(event("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "kernel", t + 10, 20, tid=7))
    trace = write_trace(tmp_path / "x-TP-0.trace.json", events)
    out = tmp_path / "steps.csv"
    marker = "^[=@+-].*#\\d+$"
    result = CliRunner().invoke(app, ["trace", "summarize", str(trace), "--step-marker", marker, "--csv", str(out)])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert len(rows) == 3
    for row in rows:  # a spreadsheet sees text, never a formula
        assert all(not cell.startswith(("=", "+", "-", "@")) or cell.lstrip("+-").replace(".", "").isdigit()
                   for cell in row.values()), row  # fmt: skip
        assert row["phase"] == "'" + payload


def test_a_run_table_and_a_gate_table_read_back_exactly_what_was_written(tmp_path):
    from verifylab.csv_cells import csv_text, restored

    frame = pd.DataFrame({"flag": ["--api-key", "'quoted", "=1+1", "plain", "-3.5"], "n": [1, 2, 3, 4, 5]})
    text = csv_text(frame, lineterminator="\n")
    assert "=1+1" not in text.replace("'=1+1", "")
    back = restored(pd.read_csv(io.StringIO(text), dtype={"flag": str}))
    pd.testing.assert_frame_equal(back, frame)


def _fields_a_spreadsheet_starts(line: str) -> list[str]:
    """Every cell a spreadsheet that splits on commas, semicolons or tabs (quotes honoured) starts in one CSV line."""
    return [field for sep in ",;\t" for row in csv.reader([line], delimiter=sep) for field in row]


@settings(max_examples=200)
@given(st.text(alphabet=st.sampled_from(list("x;=+-@'\t,|1. ")), max_size=24))
def test_no_separator_a_spreadsheet_splits_on_starts_a_formula_and_every_cell_reads_back(text):
    """#77: a cell such as ``x;=cmd|...`` is safe in a spreadsheet that splits on ``;`` or a tab too, and
    :func:`restore_cell` gives every text back exactly."""
    from verifylab.csv_cells import csv_text, neutral_cell, restore_cell

    assert restore_cell(neutral_cell(text)) == text
    written = csv_text(pd.DataFrame({"cell": [text]}), lineterminator="\n").splitlines()[1:]
    for line in written:
        for field in _fields_a_spreadsheet_starts(line):
            assert not field.startswith(("=", "+", "-", "@")) or re.fullmatch(r"[+-]?[\d.]+", field), (text, line)
