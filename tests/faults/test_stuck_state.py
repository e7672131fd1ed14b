"""#27 item 9: a run's status says what it holds. A campaign where no variant started was stored "complete" with
nothing in it; a successful ``bench --run-id`` stayed "partial" for good; a killed write's temporary file stayed
in a run folder after a resume and changed the edition's data digest."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from typer.testing import CliRunner

from verifylab.bench.method import SingleStreamConfig
from verifylab.bench.runner import RunPlace
from verifylab.cli import app
from verifylab.errors import ServerError
from verifylab.server.launch import serve
from verifylab.server.variants import DEFAULT_VARIANTS
from verifylab.store.digests import data_digest
from verifylab.store.runs import RunStore

from ..test_bench import base
from ..test_bench import help_text as help_text


@pytest.mark.slow  # starts the test double
def test_a_campaign_where_no_variant_started_is_stored_failed(tmp_path):
    from verifylab.bench.campaign import run_campaign

    with pytest.raises(ServerError, match="no variant started"):
        run_campaign(
            base("--exit-with", "RuntimeError: boom"),
            ["baseline"],
            SingleStreamConfig(1, 0, 4),
            [1],
            4,
            RunPlace(tmp_path, "20261201-000000-none", "test double (not data)"),
        )
    assert RunStore(tmp_path / "runs").manifest("20261201-000000-none").status == "failed"


@pytest.mark.slow  # starts the test double
def test_a_bench_measured_in_full_leaves_its_run_complete(tmp_path, help_text):
    run_id = "20261201-000000-single"
    with serve(base(), DEFAULT_VARIANTS["baseline"], tmp_path / "logs", help_text=help_text) as (server, _):
        args = ["bench", "--url", server.url, "--runs", "2", "--warmup", "0", "--max-tokens", "8"]
        out = CliRunner().invoke(
            app, [*args, "--run-id", run_id, "--label", "test double (not data)", "--data-dir", str(tmp_path)]
        )
    assert out.exit_code == 0, out.output
    assert RunStore(tmp_path / "runs").manifest(run_id).status == "complete"


def test_a_killed_writes_temporary_file_is_no_data_and_is_cleaned_on_resume(repo_root, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(repo_root / "data", data)
    before = data_digest(data)
    run_id = "20261130-130757-2xh200-live-tp2"
    folder = data / "runs" / run_id
    stray = folder / ".single_stream.csv.k1ll3d.tmp"  # what kill -9 between write and rename leaves
    stray.write_text("half a table")
    (folder / ".manifest.json.x9.tmp").write_text("{")
    assert data_digest(data) == before  # never hashed: the edition is the same
    store = RunStore(data / "runs")
    store.upsert_rows(run_id, "single_stream", store.read_table(run_id, "single_stream").iloc[[0]])
    assert not stray.exists() and not (folder / ".manifest.json.x9.tmp").exists()  # the resume cleaned them
    assert isinstance(store.read_table(run_id, "single_stream"), pd.DataFrame)
