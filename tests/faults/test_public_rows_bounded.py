"""Issue 70, public rows bounded by physics: a public latency under the wire's floor for its size or over any
transport's ceiling, a bandwidth over the fastest link and a speculation speedup past the tokens a cycle can emit are
refused with the row named, before they can move an answer. At 7ac0507 rows at 1e-6 µs or 6,100,000 µs and a 100x
speedup were accepted and moved ``box --plan``'s goodput. The boundary: ``store/public.refuse_unphysical`` and
``refuse_speedup_past_chain``, applied by each public table's check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.errors import ReferenceDataError
from verifylab.store.public import load_public_measurements
from verifylab.store.public_speculation import load_public_speculation

DATA = Path(__file__).resolve().parents[2] / "data"
MEASUREMENTS = "reference/public_measurements.csv"
SPECULATION = "reference/public_speculation.csv"
CONTEXT = "reference/public_context.csv"


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    return data


def _edit(data: Path, table: str, row_id: str, **fields: str) -> None:
    """One row of a public table changed as a hostile or careless editor would: its number with a quote carrying it."""
    path = data / table
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert row_id in set(frame["id"]), row_id
    for field, value in fields.items():
        frame.loc[frame["id"] == row_id, field] = value
    frame.to_csv(path, index=False)


def _latency(value: str, unit: str = "us", row: str = "pub-31") -> tuple[str, str, dict[str, str]]:
    return MEASUREMENTS, row, {"value": value, "unit": unit, "quote": f"all-reduce {value} {unit}"}


def _spec_row(data: Path, table: str, row_id: str, times: float) -> dict[str, str]:
    frame = pd.read_csv(data / table, dtype=str, keep_default_na=False).set_index("id")
    spec = f"{float(frame.loc[row_id, 'plain_tok_s']) * times:.1f}"
    return {"spec_tok_s": spec, "quote_spec": f"| 1 | {spec} |"}


CASES = {
    # the rows
    "latency 1e-6 us": (*_latency("0.000001"), "below the wire's floor"),
    "latency 6,100,000 us": (*_latency("6100000"), "above the slowest transport"),
    "speedup 100x": (SPECULATION, "kimi-k26-c1", 100.0, "past the 4 tokens a cycle can emit"),
    # held out: a second unit, a message large enough that the wire sets the floor, a bandwidth, the context matrix
    "100 MB in 1 us (ms)": (*_latency("0.001", "ms", "pub-59"), "below the wire's floor"),
    "5000 GB/s": (MEASUREMENTS, "pub-44", {"value": "5000", "quote": "bus bandwidth 5000 GB/s"}, "fastest link"),
    "context speedup 50x": (CONTEXT, None, 50.0, "tokens a cycle can emit"),
}


def load_public_context(data: Path) -> pd.DataFrame:
    from verifylab.store.public_context import load_public_context as load  # the context matrix came with issue 66

    return load(data)


LOADERS = {MEASUREMENTS: load_public_measurements, SPECULATION: load_public_speculation, CONTEXT: load_public_context}


@pytest.mark.parametrize("case", list(CASES))
def test_an_unphysical_public_row_is_refused_naming_it(tmp_path, case):
    table, row_id, change, words = CASES[case]
    data = _data(tmp_path)
    if row_id is None:  # the context matrix: its first row with a speculative rate
        frame = pd.read_csv(data / table, dtype=str, keep_default_na=False)
        row_id = frame.loc[frame["spec_tok_s"] != "", "id"].iloc[0]
    fields = _spec_row(data, table, row_id, change) if isinstance(change, float) else change
    _edit(data, table, row_id, **fields)
    with pytest.raises(ReferenceDataError) as refused:
        LOADERS[table](data)
    assert row_id in str(refused.value) and words in str(refused.value), refused.value


def test_the_shipped_public_tables_are_within_physics():
    assert len(load_public_measurements(DATA)) and len(load_public_speculation(DATA)) and len(load_public_context(DATA))


@pytest.mark.parametrize("value", ["0.000001", "6100000"])
def test_box_plan_never_prices_an_unphysical_row(tmp_path, value):
    """The row the fast-path curve of 8 x RTX PRO 6000 reads: box --plan ends naming it, it does not move the plan."""
    data = _data(tmp_path)
    table, row_id, fields = _latency(value)
    _edit(data, table, row_id, **fields)
    args = ["box", "--plan", "--data-dir", str(data), "--tp", "8", "--gpu", "rtx-pro-6000", "--accept", "1.95"]
    result = CliRunner().invoke(app, [*args, "--regime", "healthy P2P"])
    assert result.exit_code != 0 and "pub-31" in result.output, result.output
