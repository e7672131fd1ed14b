"""#79: the verify path's gates, read from each audited SGLang wheel (and the FlashInfer it pins). The slow lane holds
hand-written expected entries per version against the real published wheels (an entry the audit stops finding fails
it, as ``EXPECTED_CHANGES`` does for fusion); the fast lane renders chapter 1's tables, its finding and the decision
page's backend line from a planted audit and finds the planted values; the evaluator refuses a predicate it does not
know, naming it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from verifylab.errors import GateError
from verifylab.gates.default_backend import default_backend_gates
from verifylab.gates.verify_path import (
    VERIFY_FLAGS,
    tree_verify_path,
    verify_path_frame,
    verify_path_table,
)
from verifylab.vocab import version_key

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache"
TRITON = "sglang/srt/layers/attention/triton_backend.py"
SPLITKV = "sglang/kernels/ops/attention/verify_splitkv.py"
REGISTRY = "sglang/srt/layers/attention/attention_registry.py"
SERVER_ARGS = "sglang/srt/server_args.py"
OVERRIDE = "sglang/srt/arg_groups/model_override_base.py"


def _defaults(file: str, function: str) -> set[tuple[str, str, str, str, str, str]]:
    """The default backend per shape and GPU family, as read by hand from each wheel's default-backend branch."""
    chosen = {("MLA", "SM90"): "fa3", ("MLA", "SM100"): "flashinfer", ("MLA", "SM120"): "triton",
              ("dense", "SM90"): "fa3", ("dense", "SM100"): "trtllm_mha", ("dense", "SM120"): "flashinfer"}  # fmt: skip
    return {("default attention backend", s, g, file, function, v) for (s, g), v in chosen.items()}


def _splitkv(mla_refused: bool, shared: bool) -> set[tuple[str, str, str, str, str, str]]:
    rows = {
        ("split-KV verify switch", "", "SM120", TRITON, "TritonAttnBackend.__init__", "is_gfx95_supported()"),
        ("split-KV verify switch", "", "SM120", TRITON, "TritonAttnBackend.__init__",
         "envs.SGLANG_ENABLE_SPLITKV_VERIFY.get()"),
        ("split-KV verify switch", "", "SM120", TRITON, "TritonAttnBackend.__init__", "self.topk == 1"),
        ("verify kernel (Triton)", "", "SM120", TRITON, "TritonAttnBackend.forward_extend",
         "no split-KV path serves the verify"),
        ("split-KV verify refuses MLA", "MLA", "", SPLITKV, "can_handle",
         "q_extend.shape[2] != v_extend.shape[2]" if mla_refused else "no head-dim check"),
    }  # fmt: skip
    if shared:
        rows.add(("grouped-head shared-KV verify", "MLA", "SM120", TRITON, "_should_use_verify_shared_kv", ""))
    return rows


FLASHINFER_ADMITTED = {("flashinfer MLA backend admitted", "MLA", "SM120", REGISTRY, "create_flashinfer_backend", "")}
# (item, shape, gpu, file, function, value or condition) the audit must find in each published wheel.
EXPECTED_VERIFY = {
    "0.5.9": _defaults(SERVER_ARGS, "_handle_attention_backend_compatibility") | FLASHINFER_ADMITTED,
    "0.5.17": _defaults(SERVER_ARGS, "_get_default_attn_backend") | _splitkv(False, False) | FLASHINFER_ADMITTED,
    "0.5.22": _defaults(OVERRIDE, "get_default_attn_backend") | _splitkv(True, True) | FLASHINFER_ADMITTED,
    "0.5.23": _defaults(OVERRIDE, "get_default_attn_backend") | _splitkv(True, True) | FLASHINFER_ADMITTED,
}
PINNED = {"0.5.9": "0.6.3", "0.5.17": "0.6.15.post1", "0.5.22": "0.7.1", "0.5.23": "0.7.2"}


def _found(frame: pd.DataFrame) -> set[tuple[str, str, str, str, str, str]]:
    """Each row under its value and its condition, so an expected entry may name either (an empty one: neither)."""
    keys = set()
    for r in frame.to_dict("records"):
        for shown in (r["value"], r["condition"], ""):
            keys.add((r["item"], r["shape"], r["gpu"], r["file"], r["function"], shown))
    return keys


@pytest.fixture(scope="module")
def audited() -> pd.DataFrame:
    return verify_path_table(sorted(EXPECTED_VERIFY, key=version_key), CACHE / "wheels")


@pytest.mark.slow
@pytest.mark.parametrize("version", sorted(EXPECTED_VERIFY))
def test_each_wheels_verify_path_holds_its_expected_entries(audited, version):
    mine = audited[(audited["package"] == "sglang") & (audited["version"] == version)]
    missing = EXPECTED_VERIFY[version] - _found(mine)
    assert not missing, f"sglang {version}: the audit no longer finds {sorted(missing)}"
    assert (mine["line"] > 0).all() and (mine["file"] != "").all()
    flags = mine[mine["item"] == "verify option"]
    assert set(flags["condition"]) == set(VERIFY_FLAGS) and set(flags["value"]) == {"exists"}
    pinned = audited[(audited["package"] == "flashinfer") & (audited["note"] == f"pinned by sglang {version}")]
    assert set(pinned["version"]) == {PINNED[version]}
    assert {"flashinfer MLA kernel on SM120", "flashinfer MLA JIT arch"} <= set(pinned["item"])


@pytest.mark.slow
def test_the_stored_audit_is_what_the_wheels_say(audited):
    from verifylab.store.evidence import Evidence

    stored = Evidence(ROOT / "data").verify_path  # as `gates matrix` wrote it, read back as the book reads it
    assert stored.astype(str).to_dict("records") == audited.astype(str).to_dict("records")


@pytest.mark.slow
def test_an_installed_tree_is_read_as_its_wheel_is(tmp_path, audited):
    import zipfile

    wheel = next((CACHE / "wheels").glob("sglang-0.5.22-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.endswith(".py") or name.endswith("METADATA"):
                archive.extract(name, tmp_path)
    tree = tree_verify_path(tmp_path)
    mine = audited[(audited["package"] == "sglang") & (audited["version"] == "0.5.22")]
    assert tree[tree["package"] == "sglang"].astype(str).to_dict("records") == mine.astype(str).to_dict("records")


def test_a_predicate_the_evaluator_does_not_know_stops_the_audit_naming_it():
    source = """
def _get_default_attn_backend(self, use_mla_backend, model_config):
    if use_mla_backend:
        if is_some_new_gpu():
            return "fa9"
        return "triton"
    return "flashinfer"
"""
    with pytest.raises(GateError, match=r"cannot evaluate is_some_new_gpu\(\)"):
        default_backend_gates({SERVER_ARGS: source}.get, [SERVER_ARGS], "9.9.9")
    with pytest.raises(GateError, match="no default attention backend function"):
        default_backend_gates({SERVER_ARGS: "x = 1\n"}.get, [SERVER_ARGS], "9.9.9")


def _planted(tmp_path: Path, backend: str) -> Path:
    """A copy of the shipped data whose verify-path audit names values no wheel holds: ``backend`` for an MLA model on
    SM120 at line 4242, and a verify kernel of another name."""
    from verifylab.csv_cells import csv_text
    from verifylab.store.evidence import Evidence

    data = tmp_path / "data"
    shutil.copytree(ROOT / "data", data)
    frame = Evidence(data).verify_path
    default = (frame["item"] == "default attention backend") & (frame["shape"] == "MLA") & (frame["gpu"] == "SM120")
    frame.loc[default, "value"] = backend
    frame.loc[default, "line"] = 4242
    kernel = frame["item"] == "verify kernel (Triton)"
    frame.loc[kernel, "value"] = "planted_verify_fwd (serial over each stream's prefix)"
    (data / "gates" / "verify_path.csv").write_text(csv_text(frame, lineterminator="\n"))
    return data


def test_chapter_one_and_the_decision_page_word_the_planted_audit(tmp_path):
    from verifylab.chapters import ch01_environment_and_gates as chapter
    from verifylab.publish.decision import launch_section
    from verifylab.store.evidence import Evidence
    from verifylab.vocab import RECOMMENDED_STACK

    ev = Evidence(_planted(tmp_path / "a", "plantedbackend"))
    assert "`plantedbackend`" in str(chapter.verify_path_finding(ev))
    table = chapter.verify_path_gates(ev, RECOMMENDED_STACK[0]).cells()
    row = table[(table["gate"] == "default backend") & (table["model"] == "MLA") & (table["GPU"] == "SM120")].iloc[0]
    assert row["value"] == "plantedbackend" and row["file:line"].endswith(":4242")
    launch = launch_section(ev)
    assert f"SGLang {RECOMMENDED_STACK[0]} runs Kimi-K2.5 (MLA) on `plantedbackend`" in launch
    assert ":4242`" in launch and "`--attention-backend flashinfer` changes it" in launch
    triton = Evidence(_planted(tmp_path / "b", "triton"))  # the Triton backend's verify kernel is named with it
    assert "`planted_verify_fwd`" in str(chapter.verify_path_finding(triton))
    assert "whose verify is `planted_verify_fwd`" in launch_section(triton)


def test_without_an_audit_the_pages_say_how_to_make_one(tmp_path):
    from verifylab.chapters import ch01_environment_and_gates as chapter
    from verifylab.store.evidence import Evidence

    data = _planted(tmp_path, "triton")
    (data / "gates" / "verify_path.csv").unlink()
    ev = Evidence(data)
    assert "verifylab gates matrix" in str(chapter.verify_path_finding(ev))
    assert "verifylab gates matrix" in str(chapter.verify_path_gates(ev, "0.5.22"))


def test_the_frame_keeps_its_columns_when_empty():
    assert list(verify_path_frame([]).columns)[:4] == ["package", "version", "item", "shape"]
