"""#77: a mistyped or deeply nested manifest is refused with one line naming the file (never a TypeError or a
RecursionError), by `runs list` and `runs migrate` alike; hostile manifests generated."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.errors import ManifestError
from verifylab.store.manifest import MAX_JSON_DEPTH, json_depth, read_manifest

RUN = "20261206-000000-hostile"
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)
FIELDS = ["run_id", "label", "created", "parameters", "tables", "notes", "schema_version", "gpu_name", "versions"]


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _write(folder: Path, text: str) -> Path:
    run = folder / "runs" / RUN
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.json").write_text(text)
    return run / "manifest.json"


def test_depth_is_read_without_parsing_and_strings_do_not_count():
    assert json_depth(_nested(5)) == 5 and json_depth('{"a": "[[[[[[", "b": [{}]}') == 3
    assert json_depth('{"a": "\\\\", "b": [1]}') == 2


def test_a_deep_manifest_is_refused_by_both_commands(tmp_path):
    manifest = _write(tmp_path, '{"parameters": ' + _nested(5000) + "}")
    try:
        read_manifest(manifest)
    except ManifestError as exc:
        assert "levels deep" in str(exc) and str(MAX_JSON_DEPTH) in str(exc)
    else:
        raise AssertionError("a 5000-level manifest was read")
    for argv in (["runs", "list"], ["runs", "migrate"]):
        result = CliRunner().invoke(app, [*argv, "--data-dir", str(tmp_path)])
        assert result.exit_code != 0 and "levels deep" in result.output and "Traceback" not in result.output


@settings(max_examples=60)
@given(st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=len(FIELDS)))
def test_a_mistyped_manifest_is_refused_in_one_line(tmp_path_factory, fields):
    folder = tmp_path_factory.mktemp("hostile")
    manifest = _write(folder, json.dumps(fields))
    try:
        read_manifest(manifest)
    except ManifestError as exc:
        assert str(manifest) in str(exc)
    result = CliRunner().invoke(app, ["runs", "list", "--data-dir", str(folder)])
    assert not isinstance(result.exception, (TypeError, RecursionError, AttributeError, KeyError)), result.output
