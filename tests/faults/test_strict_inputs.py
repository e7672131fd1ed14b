"""Issue 27 items 6, 12 and 13: inputs that were accepted and should not be. At b488f1d a second ``mode:`` key
silently ran the chapters live, a YAML alias bomb took 26 s and printed a 254 MB error line, a non-UTF-8
parameters file raised a traceback, and a manifest of schema 99 was read as complete."""

from __future__ import annotations

import json

import pytest

from verifylab.errors import ManifestError, ModelInputError, ParameterError
from verifylab.model.inputs.configs import costs_from_config
from verifylab.publish.pipeline import load_params

from ..test_runs import make_store


def test_a_key_given_twice_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("mode: replay\ndata_dir: data\nmode: live\n")
    with pytest.raises(ParameterError, match=r"p\.yaml: .*line 3: key 'mode' is given twice"):
        load_params(path)


def test_an_alias_bomb_is_refused_at_once_in_a_short_line(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParameterError, match="anchors and aliases") as err:
        load_params(path)
    assert len(str(err.value)) < 400


def test_a_parameters_file_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("label: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ParameterError, match=r"latin1\.yaml: not UTF-8 text"):
        load_params(path)


def test_a_manifest_from_a_newer_verifylab_is_refused(tmp_path):
    store, manifest = make_store(tmp_path)
    path = store.path(manifest.run_id) / "manifest.json"
    data = json.loads(path.read_text()) | {"schema_version": 99}
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match="schema 99 is newer than this verifylab reads"):
        store.manifest(manifest.run_id)


def test_a_config_out_of_bounds_is_refused_before_any_loop():
    """Issue 53 class 7: a config.json with 10^12 layers hung `box` and `model speculation` (a loop over layers);
    the bounds are checked first, naming the field."""
    base = {"hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32, "vocab_size": 1024}
    for field, value in (("num_hidden_layers", 10**12), ("hidden_size", 10**9), ("num_experts", 10**9)):
        with pytest.raises(ModelInputError, match=field.split("_")[1] if field == "num_experts" else field):
            costs_from_config({**base, field: value, "num_experts_per_tok": 1, "moe_intermediate_size": 8})
    with pytest.raises(ModelInputError, match="exceeds the 4 experts"):
        costs_from_config({**base, "num_experts": 4, "num_experts_per_tok": 8, "moe_intermediate_size": 8})
