"""#54: `runs list` fits an 80-column terminal with every run id whole on one line (what a reader copies);
`--wide` shows every column."""

from __future__ import annotations

import io

from rich.console import Console
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.store.runs import RunStore


def test_the_run_list_fits_80_columns_with_whole_ids(repo_root, monkeypatch):
    import verifylab.cli.book as book

    out = io.StringIO()
    monkeypatch.setattr(book, "console", Console(width=80, file=out))
    result = CliRunner().invoke(app, ["runs", "list", "--data-dir", str(repo_root / "data")])
    assert result.exit_code == 0, result.output
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    ids = RunStore(repo_root / "data" / "runs").summary()["run_id"]
    for run_id in ids:
        assert any(run_id in line for line in lines), f"{run_id} is split over lines"
    import verifylab.cli._shared as shared

    wide = io.StringIO()
    monkeypatch.setattr(shared, "console", Console(width=200, file=wide))
    CliRunner().invoke(app, ["runs", "list", "--data-dir", str(repo_root / "data"), "--wide"])
    assert "interconnect" in wide.getvalue() and "interconnect" not in out.getvalue()
