"""#71: the interactive commands answer from a cache on disk: what the model derived from the data (the grid's fit,
the regime curves, the option boxes) kept between calls, and a pure call's whole answer (with the page it writes)
given again while nothing it is made of changed. Each cached answer is the one the command computes; any input
changed (a named file, the data, the code, an option) computes it again; ``VERIFYLAB_CACHE=off`` keeps nothing."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verifylab.entry import answer_name, is_pure, page_folder
from verifylab.model.inputs.stored import stored_inputs
from verifylab.store.cache_folder import cache_folder_open

ROOT = Path(__file__).resolve().parents[1]
VERIFYLAB = Path(sys.executable).with_name("verifylab")
PLAN = ["box", "--plan", "--config", "examples/configs/qwen3-30b-a3b", "--gpu", "h200", "--tp", "1", "--load", "8",
        "--accept", "2.4", "--decode-tok-s", "90"]  # fmt: skip
PROBE = ["box", "--probe", "20261202-203301-box-probe", "--config", "examples/configs/qwen3-30b-a3b"]


def test_only_calls_that_answer_are_pure():
    assert is_pure(["model", "whatif"]) and is_pure(["model", "speculation", "--config", "x"]) and is_pure(PLAN)
    assert is_pure(PROBE) and page_folder(PROBE) == Path("box/20261202-203301-box-probe")
    assert page_folder([*PROBE, "--out", "mine"]) == Path("mine") and page_folder(PLAN) is None
    for acting in (["--verify", "v.yaml"], ["--server", "http://x"], ["--help"], ["--dry-run"], ["--gpus=8"]):
        assert not is_pure([*PLAN, *acting]), acting
    assert not is_pure(["box"]) and not is_pure(["book"]) and not is_pure(["model", "whatif", "--help"])


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "p"
    shutil.copytree(ROOT / "data", project / "data")
    shutil.copytree(ROOT / "examples" / "configs", project / "examples" / "configs")
    return project


def _run(project: Path, cache: str, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VERIFYLAB_CACHE": cache, "COLUMNS": "160"}
    return subprocess.run([str(VERIFYLAB), *argv], cwd=project, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_kept_answer_is_the_computed_one_and_any_input_changed_computes_it_again(tmp_path):
    project, cache = _project(tmp_path), tmp_path / "cache"
    computed = _run(project, "off", *PLAN)
    assert computed.returncode == 0, computed.stderr
    assert not cache.exists()
    first = _run(project, str(cache), *PLAN)
    answers = sorted((cache / "answers").glob("*.json"))
    assert first.stdout == computed.stdout and len(answers) == 1
    with cache_folder_open(cache, "answers") as folder:  # a kept answer is what is given: rewrite it through the
        kept = json.loads(folder.read(answers[0].name) or b"")  # cache and the next call gives the change
        kept["stdout"] = "planted\n"
        folder.write(answers[0].name, json.dumps(kept).encode())
    assert _run(project, str(cache), *PLAN).stdout == "planted\n"
    answers[0].write_text(json.dumps(kept | {"stdout": "forged\n"}))  # written around the cache: not its own
    assert _run(project, str(cache), *PLAN).stdout == computed.stdout
    config = project / "examples" / "configs" / "qwen3-30b-a3b" / "config.json"
    config.write_text(config.read_text().replace("{", '{"unused_field": 1, ', 1))  # a named file changed
    again = _run(project, str(cache), *PLAN)
    assert again.stdout == computed.stdout and len(list((cache / "answers").glob("*.json"))) == 2
    other = _run(project, str(cache), *PLAN[:-1], "60")  # another option value: its own answer
    assert other.returncode == 0 and other.stdout != computed.stdout
    (project / "data" / "reference" / "public_context.csv").write_text(
        (project / "data" / "reference" / "public_context.csv").read_text() + "\n"
    )
    assert answer_name_in(project, cache, PLAN) != answers[0].name  # the data changed: another key


def answer_name_in(project: Path, cache: Path, argv: list[str]) -> str | None:
    here, before = Path.cwd(), os.environ.get("VERIFYLAB_CACHE")
    os.chdir(project)
    os.environ["VERIFYLAB_CACHE"] = str(cache)
    try:
        return answer_name(argv)
    finally:
        os.chdir(here)
        os.environ["VERIFYLAB_CACHE"] = before or "off"


@pytest.mark.slow
def test_a_kept_probe_answer_writes_its_page_again(tmp_path):
    project, cache = _project(tmp_path), tmp_path / "cache"
    first = _run(project, str(cache), *PROBE)
    assert first.returncode == 0, first.stderr
    page = project / "box" / "20261202-203301-box-probe"
    written = {p.name: p.read_bytes() for p in page.iterdir()}
    shutil.rmtree(page)
    second = _run(project, str(cache), *PROBE)
    assert second.stdout == first.stdout and {p.name: p.read_bytes() for p in page.iterdir()} == written


def test_the_derived_values_are_kept_and_a_broken_file_is_computed_again(tmp_path, monkeypatch):
    from verifylab.model.case.speculation import inputs
    from verifylab.store.derived_disk import cache_key
    from verifylab.store.evidence import Evidence

    monkeypatch.setenv("VERIFYLAB_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data"
    shutil.copytree(ROOT / "data", data)
    ev = Evidence(data, keep_derived=True)
    curves = inputs(stored_inputs(ev)).curves
    ev.derived_cache.save()
    kept = tmp_path / "cache" / "derived" / cache_key(data)
    with cache_folder_open(tmp_path / "cache", "derived") as folder:
        assert kept.is_file() and any("model_inputs" in str(k[0]) for k in pickle.loads(folder.read(kept.name) or b""))
    again = Evidence(data, keep_derived=True)
    assert len(again.derived_cache) > 0  # read back before anything is asked
    assert inputs(stored_inputs(again)).curves.public_uses() == curves.public_uses()
    kept.write_bytes(b"not a pickle")
    broken = Evidence(data, keep_derived=True)
    assert len(broken.derived_cache) == 0 and inputs(stored_inputs(broken)).curves.public_uses() == curves.public_uses()
    monkeypatch.setenv("VERIFYLAB_CACHE", "off")
    assert type(Evidence(data, keep_derived=True).derived_cache).__name__ == "DerivedCache"
