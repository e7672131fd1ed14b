"""#71: each exhibit's Reproduce line rebuilds that exhibit alone: ``verifylab exhibit NAME`` finds the cell its
chapter's notebook makes it in and makes it again from the data folder, the same cells the edition exports."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from verifylab.chapters.exhibits import book_exhibits, notebook_exhibits
from verifylab.cli import app
from verifylab.errors import ParameterError
from verifylab.report.tables import Table

ROOT = Path(__file__).resolve().parents[1]


def test_every_numbered_exhibit_of_every_chapter_is_found_with_its_call():
    exhibits = book_exhibits(ROOT)
    assert len(exhibits) >= 60
    cells = sum(
        1
        for line in (ROOT / "notebooks").glob("*.py")
        for text in [line.read_text()]
        for _ in range(text.count("mystnb"))
    )
    assert len(exhibits) == cells  # one per figure cell, none missed
    assert exhibits["tbl-public-speculation"].function == "public_speculation_curves"
    assert exhibits["tbl-public-speculation"].chapter == "04_fusion_vs_elimination"


def test_every_table_rebuilt_alone_has_the_cells_the_edition_exports(built_book, shipped):
    """Every numbered table of the book, rebuilt alone from the shipped data, has the cells of its export in the book
    built from the same data (each caption's Reproduce line is this command). A table made from the chapter's
    parameters is rebuilt with their defaults, as `make book` makes it: the session's book was run with the smoke
    parameters, so those are compared elsewhere (the launch commands' tests)."""
    from verifylab.csv_cells import restored

    compared = 0
    for name, exhibit in book_exhibits(ROOT).items():
        if exhibit.uses_parameters:
            continue
        exports = list((built_book / "exports").glob(f"fig-*-{name}.csv"))
        alone = exhibit.build(ROOT / "data", shipped)
        if not isinstance(alone, Table) or not exports:
            continue
        exported = restored(pd.read_csv(exports[0], dtype=str, keep_default_na=False)).drop(columns=["edition"])
        rebuilt = alone.cells().astype(str)
        assert list(rebuilt.columns) == list(exported.columns), name
        pd.testing.assert_frame_equal(rebuilt.reset_index(drop=True), exported.reset_index(drop=True), obj=name)
        compared += 1
    assert compared >= 40


def test_the_command_prints_a_table_writes_its_cells_and_names_a_wrong_name(tmp_path):
    runner = CliRunner()
    out = tmp_path / "cells.csv"
    result = runner.invoke(app, ["exhibit", "tbl-reported-comparisons", "--csv", str(out)])
    assert result.exit_code == 0, result.output
    cells = pd.read_csv(io.StringIO(out.read_text()))
    assert "a liability from 30 concurrent requests" in " ".join(cells["comparison"])
    wrong = runner.invoke(app, ["exhibit", "tbl-reported"])
    assert wrong.exit_code == 2 and "tbl-reported-comparisons" in wrong.output
    chart = runner.invoke(app, ["exhibit", "fig-case-pareto", "--out", str(tmp_path / "p.svg")])
    assert chart.exit_code == 0 and (tmp_path / "p.svg").read_text().startswith("<svg")


def test_an_exhibit_cell_that_is_not_one_chapter_call_is_refused(tmp_path):
    notebook = tmp_path / "99_x.py"
    notebook.write_text(
        "from verifylab.chapters import ch02_benchmarks as chapter\n"
        '# %% mystnb={"figure": {"caption": "c", "name": "tbl-x"}}\n'
        "import os; os.system('x')\n"
    )
    with pytest.raises(ParameterError, match=r"tbl-x: (not one call|an exhibit cell is one call)"):
        notebook_exhibits(notebook)


def test_an_exhibit_made_from_parameters_is_rebuilt_with_the_params_file_the_book_ran(tmp_path):
    """A table its chapter's parameters make (the recommendations' launch command) is rebuilt with the defaults, as
    `make book` runs, or with the params file a `verifylab run` used (--params)."""
    exhibit = book_exhibits(ROOT)["tbl-recommendations"]
    assert exhibit.uses_parameters
    runner = CliRunner()
    default, smoke = tmp_path / "default.csv", tmp_path / "smoke.csv"
    first = runner.invoke(app, ["exhibit", "tbl-recommendations", "--csv", str(default)])
    params = ROOT / "examples" / "params-smoke.yaml"
    second = runner.invoke(app, ["exhibit", "tbl-recommendations", "--params", str(params), "--csv", str(smoke)])
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert "--model-path /models/tiny-qwen3 --tp-size 1" in smoke.read_text()
    assert "--model-path /models/Kimi-K2.5 --tp-size 8" in default.read_text()


@pytest.mark.parametrize(("name", "flag"), [("fig-context-gain", "--out"), ("tbl-public-speculation", "--csv")])
def test_an_output_named_as_a_folder_is_refused_in_one_line_and_writes_nothing(tmp_path, name, flag):
    """`--out DIR` or `--csv DIR` wrote the whole file beside the folder and then failed renaming it, a traceback."""
    folder = tmp_path / "out"
    folder.mkdir()
    result = CliRunner().invoke(app, ["exhibit", name, flag, str(folder), "--data-dir", str(ROOT / "data")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.exception  # not a traceback
    suffix = "svg" if flag == "--out" else "csv"
    assert f"{flag} {folder}: a folder; give a file name, e.g. {folder / name}.{suffix}" in " ".join(
        result.output.split()
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and not any(folder.iterdir())


def test_an_atomic_write_onto_a_folder_fails_before_it_writes(tmp_path):
    from verifylab.errors import StorageError
    from verifylab.iorw import atomic_write_text

    (tmp_path / "x").mkdir()
    with pytest.raises(StorageError, match="a folder is there, not a file; nothing was replaced"):
        atomic_write_text(tmp_path / "x", "a" * 100)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]  # no temporary file left beside it


def test_an_output_that_is_a_device_or_fifo_is_refused_and_left_as_it_was(tmp_path):
    """`--csv /dev/null` (to discard the cells) replaced the device with a regular file when run as root: an atomic
    write renames over its target. A FIFO stands in for the device here."""
    import os
    import stat

    from verifylab.errors import StorageError
    from verifylab.iorw import atomic_write_text

    fifo = tmp_path / "sink"
    os.mkfifo(fifo)
    result = CliRunner().invoke(app, ["exhibit", "tbl-public-speculation", "--csv", str(fifo), "--data-dir",
                                      str(ROOT / "data")])  # fmt: skip
    assert result.exit_code == 2 and "not a regular file (a device, FIFO or socket)" in result.output, result.output
    with pytest.raises(StorageError, match="not a regular file"):
        atomic_write_text(fifo, "cells\n")
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and sorted(p.name for p in tmp_path.iterdir()) == ["sink"]
