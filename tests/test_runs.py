import json
from datetime import UTC, datetime

import pandas as pd
import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.errors import ManifestError, RunExistsError, RunNotFoundError
from verifylab.host import HostInfo
from verifylab.iorw import atomic_write_with
from verifylab.store.manifest import manifest_from_host, new_run_id
from verifylab.store.runs import RunStore


def make_store(tmp_path):
    store = RunStore(tmp_path / "runs")
    host = HostInfo(
        host="box",
        os="Linux",
        python="3.12.0",
        gpu_name="NVIDIA H200",
        compute_capability="9.0",
        gpu_count=1,
        interconnect="single GPU",
        driver="580",
        cuda="13.0",
        versions={"torch": "2.11.0"},
    )
    manifest = manifest_from_host("20261129-000000-test", "H200, SM90, one GPU", host, {"k": [1, 16]})
    store.create(manifest)
    return store, manifest


def test_roundtrip_table_and_manifest(tmp_path):
    store, manifest = make_store(tmp_path)
    frame = pd.DataFrame({"rank": [0, 1], "step": [1, 16], "wall_ms": [0.5, 1.25]})
    store.write_table(manifest.run_id, "step_wall_time", frame)
    store.write_table(
        manifest.run_id,
        "ceilings",
        frame.rename(columns={"step": "matmul_n", "wall_ms": "matmul_ms"}).drop(columns="rank"),
        fmt="csv",
    )
    assert store.run_ids() == [manifest.run_id]
    pd.testing.assert_frame_equal(store.read_table(manifest.run_id, "step_wall_time"), frame)
    assert store.read_table(manifest.run_id, "ceilings").to_dict("list") == {
        "matmul_n": [1, 16],
        "matmul_ms": [0.5, 1.25],
    }
    reread = store.manifest(manifest.run_id)
    assert reread.tables == {"step_wall_time": "step_wall_time.parquet", "ceilings": "ceilings.csv"}
    assert reread.versions.torch == "2.11.0"
    assert store.summary().loc[0, "gpu"] == "1x NVIDIA H200"


def test_create_refuses_existing(tmp_path):
    store, manifest = make_store(tmp_path)
    with pytest.raises(RunExistsError):
        store.create(manifest)


def test_unknown_run_id_names_it_and_lists_known(tmp_path):
    store, _manifest = make_store(tmp_path)
    with pytest.raises(RunNotFoundError, match=r"run 'nope' not found .*20261129-000000-test"):
        store.manifest("nope")


def test_an_unknown_id_in_a_large_store_names_the_ids_it_may_have_meant_not_every_id():
    known = [f"20261201-0900{n:02d}-h200-run" for n in range(30)] + ["20261202-203301-box-probe"]
    cut_short = RunNotFoundError.naming("20261202-203301", "data/runs", known)
    assert str(cut_short).endswith("(did you mean 20261202-203301-box-probe?)")
    mistyped = RunNotFoundError.naming("20261202-203301-box-prob3", "data/runs", known)
    assert "did you mean 20261202-203301-box-probe" in str(mistyped)
    unlike = str(RunNotFoundError.naming("nope", "data/runs", known))
    assert "31 stored runs, none like it: verifylab runs list names them" in unlike and known[0] not in unlike


def test_box_names_a_probe_that_is_not_stored_before_asking_for_a_decode_rate(repo_root):
    command = ["box", "--probe", "20261202-203301-box-prob", "--data-dir", str(repo_root / "data")]
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 1
    assert "run '20261202-203301-box-prob' not found" in result.output
    assert "did you mean 20261202-203301-box-probe?" in result.output and "--decode-tok-s" not in result.output


def test_corrupt_manifest_names_the_file(tmp_path):
    store, manifest = make_store(tmp_path)
    path = store.path(manifest.run_id) / "manifest.json"
    path.write_text('{"run_id": "20261129-000000-test", "kind": ')
    with pytest.raises(ManifestError, match=r"manifest.json: not valid JSON \(line 1"):
        store.manifest(manifest.run_id)


def test_schema_violation_names_the_field(tmp_path):
    store, manifest = make_store(tmp_path)
    path = store.path(manifest.run_id) / "manifest.json"
    data = json.loads(path.read_text())
    data["gpu_count"] = -3
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match=r"field 'gpu_count'"):
        store.manifest(manifest.run_id)
    data["gpu_count"], data["kind"] = 1, "reported"
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match=r"field 'kind'"):
        store.manifest(manifest.run_id)


def test_failed_write_leaves_previous_file_intact(tmp_path):
    target = tmp_path / "t.txt"
    target.write_text("old")

    def broken_writer(tmp):
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write_with(target, broken_writer)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.txt"]


def test_missing_table_and_bad_table_name(tmp_path):
    store, manifest = make_store(tmp_path)
    with pytest.raises(ManifestError, match="has no table 'absent'"):
        store.read_table(manifest.run_id, "absent")
    with pytest.raises(ManifestError, match="table name"):
        store.write_table(manifest.run_id, "../escape", pd.DataFrame({"a": [1]}))


def test_new_run_id_is_valid():
    run_id = new_run_id("H200 Compute!", datetime(2026, 11, 29, 8, 0, tzinfo=UTC))
    assert run_id == "20261129-080000-h200-compute"


def test_cli_errors_are_one_line(tmp_path):
    store, manifest = make_store(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["runs", "show", "missing", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "run 'missing' not found" in result.output
    assert "Traceback" not in result.output
    (store.path(manifest.run_id) / "manifest.json").write_text("{")
    result = runner.invoke(app, ["runs", "list", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "manifest.json: not valid JSON" in result.output


def test_runs_list_shows_stored_runs(tmp_path):
    make_store(tmp_path)
    result = CliRunner().invoke(app, ["runs", "list", "--data-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.output)[0]["label"] == "H200, SM90, one GPU"


def test_a_run_id_that_is_a_path_is_refused_before_anything_is_read(tmp_path):
    from verifylab.errors import ParameterError

    outside = tmp_path / "x"
    outside.mkdir()
    (outside / "manifest.json").write_text("{}")  # a manifest outside the store must never be read
    store = RunStore(tmp_path / "data" / "runs")
    for bad in ("../../x", str(outside), "a b", ".."):
        with pytest.raises(ParameterError, match="not a plain run name"):
            store.manifest(bad)
    result = CliRunner().invoke(app, ["runs", "show", "../../x", "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 2 and "not a plain run name" in result.output


def test_a_store_parses_each_file_once_and_again_when_it_is_rewritten(tmp_path, monkeypatch):
    """Readers share one parse of each manifest and table; a writer's change (another RunStore, another process)
    is seen at once, and a reader's change to a table it got never reaches the next reader."""
    store, manifest = make_store(tmp_path)
    run = manifest.run_id
    store.write_table(run, "step_wall_time", pd.DataFrame({"rank": [0], "step": [1], "wall_ms": [0.5]}))
    import verifylab.store.runs as runs_module

    parses = []
    real = runs_module.read_manifest
    monkeypatch.setattr(runs_module, "read_manifest", lambda path: parses.append(path) or real(path))
    reader = RunStore(tmp_path / "runs")
    assert [reader.manifest(run).label for _ in range(5)] == [manifest.label] * 5
    assert reader.manifests()[0].run_id == run and len(parses) == 1

    first = reader.read_table(run, "step_wall_time")
    first.loc[0, "wall_ms"] = 99.0  # the caller's copy only
    assert reader.read_table(run, "step_wall_time")["wall_ms"].tolist() == [0.5]

    store.write_table(run, "step_wall_time", pd.DataFrame({"rank": [0], "step": [1], "wall_ms": [0.75]}))
    store.set_status(run, "partial")
    assert reader.read_table(run, "step_wall_time")["wall_ms"].tolist() == [0.75]
    assert reader.manifest(run).status == "partial"


def test_a_run_folder_that_is_a_link_is_still_refused_when_listing(tmp_path):
    store, _ = make_store(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (store.root / "20261129-000001-linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ManifestError, match="a link"):
        store.run_ids()


def test_of_repeated_experiments_the_newest_run_is_shown():
    """#54: a chapter shows the newest run of each experiment (campaign, label, GPU, parameters); a run of other
    parameters, another campaign or another GPU is another experiment."""
    from dataclasses import dataclass, field
    from datetime import UTC, datetime

    from verifylab.selection import newest_of_each_experiment

    @dataclass
    class Run:
        run_id: str
        created: datetime
        label: str = "2 x H200"
        gpu_name: str | None = "NVIDIA H200"
        campaign: str = "spec-load"
        parameters: dict = field(default_factory=lambda: {"grid": [1, 2]})

    day = [datetime(2026, 12, d, tzinfo=UTC) for d in (1, 2, 3)]
    runs = [
        Run("a-old", day[0]),
        Run("b-new", day[2]),
        Run("c-mid", day[1]),
        Run("d-other-grid", day[0], parameters={"grid": [1, 4]}),
        Run("e-other-gpu", day[0], gpu_name="NVIDIA H100"),
        Run("f-other-campaign", day[0], campaign="live-tp2"),
    ]
    shown = [r.run_id for r in newest_of_each_experiment(runs)]
    assert shown == ["b-new", "d-other-grid", "e-other-gpu", "f-other-campaign"]
