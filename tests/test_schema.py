"""The run tables' one declaration (``verifylab.store.schema``): every stored table and column is declared, writes
of anything else are refused, a run of the first schema is read (and migrated) under today's names, and an upsert
replaces rows by the declared key."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from verifylab.errors import ManifestError
from verifylab.store.runs import RunStore
from verifylab.store.schema import SCHEMA_VERSION, TABLES, check_frame, columns_of, spec_of, unit_of

V1_RUN = "20261130-080118-2xh200-live-tp2"  # a run as the first schema stored it (ci95_* columns)
V1_SINGLE = "variant,median_output_tokens_per_s,ci95_low,ci95_high,accept_length,server_accept_length,runs,failed\n"


def test_every_stored_table_and_column_is_declared(repo_root):
    store = RunStore(repo_root / "data" / "runs")
    for manifest in store.manifests():
        for name in manifest.tables:
            check_frame(name, store.read_table(manifest.run_id, name))  # raises naming the table and column


def test_the_tables_the_book_shows_name_declared_columns():
    from verifylab.analysis.benchmarks import CELL_COLUMNS, STATE_COLUMNS

    assert set(CELL_COLUMNS) - {"run_id"} <= set(columns_of("sweep_cells"))  # run_id: added when runs are stacked
    assert set(STATE_COLUMNS) - {"run_id"} <= set(columns_of("variant_state"))


def test_undeclared_tables_columns_and_wrong_types_are_refused_by_name():
    with pytest.raises(ManifestError, match="table 'cells' is declared nowhere"):
        check_frame("cells", pd.DataFrame({"a": [1]}))
    with pytest.raises(ManifestError, match="table 'ceilings': column 'copy_gb' is not declared"):
        check_frame("ceilings", pd.DataFrame({"copy_gb": [1.0]}))
    with pytest.raises(ManifestError, match="column 'matmul_n' is declared int"):
        check_frame("ceilings", pd.DataFrame({"matmul_n": [1.5]}))
    with pytest.raises(ManifestError, match="column 'active' is declared bool"):
        check_frame("variant_state", pd.DataFrame({"active": ["yes"]}))
    check_frame("ceilings", pd.DataFrame({"matmul_n": [1.0, None], "matmul_ms": [None, None]}))  # nulls allowed
    assert spec_of("sweep-eagle3_fusion-c16").name == "sweep-{variant}-c{concurrency}"
    assert spec_of("single-eagle3").name == "single-{variant}"


COLUMNS_OF_EVERY_KIND = {
    "whole ints": pd.Series([1, 2, 3]),
    "unsigned": pd.Series([1, 2], dtype="uint8"),
    "whole floats with a null": pd.Series([1.0, None, 3.0]),
    "fractions": pd.Series([1.5, 2.0]),
    "only nulls": pd.Series([None, None], dtype=float),
    "empty ints": pd.Series([], dtype=int),
    "booleans": pd.Series([True, False]),
    "empty booleans": pd.Series([], dtype=bool),
    "text": pd.Series(["yes", "no"]),
    "numbers as text": pd.Series(["1", "2"]),
    "booleans among numbers": pd.Series([1, True], dtype=object),
    "nullable ints": pd.Series([1, None], dtype="Int64"),
}


@pytest.mark.parametrize("dtype", ["int", "float", "bool", "str", "json"])
def test_a_typed_column_is_judged_as_the_same_values_one_by_one(dtype):
    """The check answers a numpy column from its type; the answer is the one the values, looked at one by one
    (as objects), give."""
    from verifylab.store.schema import _holds

    for what, column in COLUMNS_OF_EVERY_KIND.items():
        assert _holds(dtype, column) == _holds(dtype, column.astype(object)), (dtype, what)


def test_units_follow_from_the_names():
    assert [unit_of(c) for c in ("span_us", "pass_ms", "wall_s", "copy_bandwidth_gbs", "goodput_tokens_per_s")] == [
        "µs",
        "ms",
        "s",
        "GB/s",
        "tok/s",
    ]
    assert unit_of("runs") == "" and unit_of("reference_bytes") == "bytes"
    names = [c.name for spec in TABLES for c in spec.columns]
    assert all(c.dtype in ("str", "int", "float", "bool", "json") for spec in TABLES for c in spec.columns)
    assert len({spec.name for spec in TABLES}) == len(TABLES), "a table declared twice"
    assert names  # every table declares its columns


def test_a_first_schema_run_is_read_under_todays_names_and_migrated(repo_root, tmp_path):
    store = RunStore(tmp_path / "runs")
    shutil.copytree(repo_root / "data" / "runs" / V1_RUN, store.root / V1_RUN)
    folder = store.path(V1_RUN)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["schema_version"] = 1
    del manifest["campaign"]  # schema 1 named the campaign in the run id only
    (folder / "manifest.json").write_text(json.dumps(manifest))
    stored = pd.read_csv(folder / "single_stream.csv")
    (folder / "single_stream.csv").write_text(V1_SINGLE + stored.to_csv(index=False, header=False), encoding="utf-8")
    other = (folder / "variant_state.csv").read_bytes()

    assert store.manifest(V1_RUN).campaign == "live-tp2"
    read = store.read_table(V1_RUN, "single_stream")
    assert {"interval_low", "interval_high"} <= set(read.columns) and "ci95_low" not in read.columns

    assert store.migrate(V1_RUN) is True
    assert store.manifest(V1_RUN).schema_version == SCHEMA_VERSION
    assert (folder / "single_stream.csv").read_text().startswith("variant,median_output_tokens_per_s,interval_low,")
    assert (folder / "variant_state.csv").read_bytes() == other  # an unchanged table keeps its bytes
    pd.testing.assert_frame_equal(store.read_table(V1_RUN, "single_stream"), read)
    assert store.migrate(V1_RUN) is False


def test_an_upsert_replaces_rows_with_the_same_key(repo_root, tmp_path):
    store = RunStore(tmp_path / "runs")
    shutil.copytree(repo_root / "data" / "runs" / V1_RUN, store.root / V1_RUN)
    before = store.read_table(V1_RUN, "sweep_cells")
    row = before.iloc[[0]].assign(output_tokens_per_s=1.0)
    store.upsert_rows(V1_RUN, "sweep_cells", row)
    after = store.read_table(V1_RUN, "sweep_cells")
    assert len(after) == len(before)
    same = (after["variant"] == row["variant"].iloc[0]) & (after["concurrency"] == row["concurrency"].iloc[0])
    assert after.loc[same, "output_tokens_per_s"].tolist() == [1.0]


def test_campaign_runs_are_found_by_their_manifest_not_their_name(repo_root, tmp_path):
    from verifylab.analysis.live_tp2 import variant_sources

    store = RunStore(tmp_path / "runs")
    renamed = "20261130-130757-box-a"  # a live TP-2 run under an id that names no campaign
    shutil.copytree(repo_root / "data" / "runs" / "20261130-130757-2xh200-live-tp2", store.root / renamed)
    decoy = "20261130-130758-not-live-tp2"  # an id that looks like one, of no campaign
    shutil.copytree(repo_root / "data" / "runs" / "20261130-130757-2xh200-live-tp2", store.root / decoy)
    for run_id, campaign in ((renamed, "live-tp2"), (decoy, "")):
        manifest = json.loads((store.path(run_id) / "manifest.json").read_text())
        (store.path(run_id) / "manifest.json").write_text(
            json.dumps(manifest | {"run_id": run_id, "campaign": campaign})
        )
    assert set(variant_sources(store, "variant_state").values()) == {renamed}


def test_schema_3_records_versions_and_plain_raw_records_without_changing_a_number(repo_root, tmp_path):
    """The migration to schema 3 (#54): colour codes out of a raw probe record, the NCCL version from the run's own
    log, verifylab's version from the recorded commit — each written into the notes; the tables stay as they were."""
    from verifylab.store.migrations import RAW_PROBE_FILE, migrate_to_3, version_of_commit

    run = "20261201-092338-2xh200-probe-p2p"
    store = RunStore(tmp_path / "runs")
    shutil.copytree(repo_root / "data" / "runs" / run, store.root / run)
    folder = store.path(run)
    raw = json.loads((folder / RAW_PROBE_FILE).read_text())
    raw["host"]["topology"] = "\x1b[4mGPU0\tGPU1\x1b[0m\n" + raw["host"]["topology"]
    (folder / RAW_PROBE_FILE).write_text(json.dumps(raw))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["schema_version"] = 2
    manifest["versions"] |= {"nccl": None, "verifylab": None}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    tables = {p.name: p.read_bytes() for p in folder.glob("*.csv")}

    edited = store.manifest(run).model_copy(deep=True)
    notes = migrate_to_3(folder, edited, version_at=lambda sha: "9.9.9" if sha.startswith("b488f1d") else None)
    stored = (folder / RAW_PROBE_FILE).read_text(encoding="utf-8")
    assert (
        "\\u001b" not in stored and "\x1b" not in stored and json.loads(stored)["host"]["topology"].startswith("GPU0")
    )
    assert edited.versions.nccl == "2.28.9+cuda13.0" and edited.versions.verifylab == "9.9.9+gb488f1d.dirty"
    assert len(notes) == 3 and all(note.startswith("schema 3:") for note in notes)
    assert {p.name: p.read_bytes() for p in folder.glob("*.csv")} == tables
    assert version_of_commit("no commit recorded", lambda sha: "1") == "unknown"
    assert version_of_commit("abcdef1234", lambda sha: None) == "unknown+gabcdef1"


def test_every_stored_run_names_its_verifylab_version_and_every_probe_its_nccl(repo_root):
    store = RunStore(repo_root / "data" / "runs")
    for manifest in store.manifests():
        assert manifest.schema_version == SCHEMA_VERSION, manifest.run_id
        assert manifest.versions.verifylab, manifest.run_id
        raw = store.path(manifest.run_id) / "probe_raw.json"
        if raw.exists():
            assert manifest.versions.nccl, manifest.run_id
            assert "\\u001b" not in raw.read_text(encoding="utf-8"), manifest.run_id


NUMPY_COLUMNS = {  # a column of each numpy type a stored table holds, with and without a missing value
    "int": [pd.Series([1, 2, 3]), pd.Series([], dtype="int64")],
    "uint": [pd.Series([1, 2], dtype="uint8")],
    "float whole": [pd.Series([1.0, 2.0]), pd.Series([1.0, None])],
    "float": [pd.Series([0.5, None]), pd.Series([None, None], dtype=float), pd.Series([], dtype=float)],
    "bool": [pd.Series([True, False]), pd.Series([], dtype=bool)],
}


@pytest.mark.parametrize("declared", ["int", "float", "bool", "str", "json"])
@pytest.mark.parametrize("kind", sorted(NUMPY_COLUMNS))
def test_a_column_its_type_answers_for_is_one_its_values_would_pass(declared, kind):
    """check_frame answers a numpy column from its type alone only where reading its values gives the same answer:
    the shortcut never lets through what the values would refuse."""
    from verifylab.store.schema import _held_by_type, _holds

    for values in NUMPY_COLUMNS[kind]:
        if _held_by_type(declared, values.dtype):
            assert _holds(declared, values), (declared, values.tolist())
