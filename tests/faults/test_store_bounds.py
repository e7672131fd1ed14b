"""Issue 27 items 2 and 6: the run store reads nothing outside itself, and a name is a name. At b488f1d a
manifest's ``tables`` entry of ``../…`` or an absolute path made ``read_table`` return that file, a run folder
that was a link out of ``data/runs`` was listed and read, and a run id with a trailing newline passed."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from verifylab.errors import ManifestError, ParameterError

from ..test_runs import make_store


def _list_table(store, manifest, file_name: str) -> None:
    path = store.path(manifest.run_id) / "manifest.json"
    data = json.loads(path.read_text())
    data["tables"]["stolen"] = file_name
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("file_name", ["../../outside.csv", "/etc/hostname", "sub/x.csv", "x.csv\n"])
def test_a_table_entry_that_is_a_path_is_refused_in_one_line(tmp_path, file_name):
    store, manifest = make_store(tmp_path)
    (tmp_path / "outside.csv").write_text("secret\n1\n")
    _list_table(store, manifest, file_name)
    with pytest.raises(ManifestError, match=r"tables .*plain file names inside the run folder") as err:
        store.read_table(manifest.run_id, "stolen")
    assert len(str(err.value).splitlines()) == 1


def test_a_run_folder_linked_out_of_the_store_is_refused(tmp_path):
    store, manifest = make_store(tmp_path)
    elsewhere = tmp_path / "elsewhere" / "20261129-000000-linked"
    elsewhere.mkdir(parents=True)
    (elsewhere / "manifest.json").write_text(
        (store.path(manifest.run_id) / "manifest.json").read_text().replace(manifest.run_id, elsewhere.name)
    )
    (store.root / elsewhere.name).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ManifestError, match=r"20261129-000000-linked: a link .*out of the run store"):
        store.run_ids()
    with pytest.raises(ManifestError, match="out of the run store"):
        store.manifest(elsewhere.name)


def test_a_table_file_linked_out_of_its_run_is_refused(tmp_path):
    store, manifest = make_store(tmp_path)
    store.write_table(manifest.run_id, "ceilings", pd.DataFrame({"matmul_n": [1]}), fmt="csv")
    outside = tmp_path / "outside.csv"
    outside.write_text("secret\n1\n")
    table = store.path(manifest.run_id) / "ceilings.csv"
    table.unlink()
    table.symlink_to(outside)
    with pytest.raises(ManifestError, match=r"a link \(or a path\) out of"):
        store.read_table(manifest.run_id, "ceilings")


def test_a_run_id_with_a_trailing_newline_is_not_a_plain_name(tmp_path):
    store, _ = make_store(tmp_path)
    with pytest.raises(ParameterError, match="is not a plain run name"):
        store.path("20261129-000000-test\n")
