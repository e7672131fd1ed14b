"""A misspelt chapter or parameter is refused before anything runs (#17 item 11), naming the file, the chapter
and the parameter, not ignored with exit 0 or left to a papermill warning."""

from __future__ import annotations

import pytest
import yaml

from verifylab.errors import ParameterError
from verifylab.publish.pipeline import PipelineParams, load_params, run_pipeline


def test_every_chapters_parameters_are_checked_before_the_first_chapter_runs(repo_root, tmp_path):
    """A typo in chapter 03's settings fails at once, naming the file, the chapter and the parameter."""
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"chapters": {"03_verify_breakdown": {"profile_stepz": 3}}}))
    with pytest.raises(ParameterError, match=r"p\.yaml: 03_verify_breakdown: parameter 'profile_stepz'"):
        load_params(path)
    path.write_text(yaml.safe_dump({"chapters": {"02_benchmarks": {"variants": ["fusoin"]}}}))
    with pytest.raises(ParameterError, match=r"02_benchmarks: parameter 'variants'.*fusoin"):
        load_params(path)
    path.write_text(yaml.safe_dump({"parameters": {"lable": "x"}}))
    with pytest.raises(ParameterError, match=r"\['lable'\] are taken by no chapter"):
        load_params(path)
    with pytest.raises(ParameterError, match="chapters \\['07_extra'\\] do not exist"):
        run_pipeline(repo_root, PipelineParams(chapters={"07_extra": {}}), render=False)
    for name in ("params.yaml", "params-eagle3.yaml", "params-pcie-sim.yaml"):
        load_params(repo_root / "benchmarks" / "live_tp2" / name)  # the shipped files pass


def test_each_chapter_is_given_only_the_parameters_its_notebook_declares(repo_root, tmp_path):
    """A shared parameter that only some chapters take (label) reaches just those: papermill has nothing to warn
    about, and what a chapter is given is exactly what its parameters cell declares."""
    import papermill

    from verifylab.chapters.registry import CHAPTER_PARAMS, parameters_for
    from verifylab.publish.build import chapter_sources, to_notebook

    shared = {"mode": "replay", "data_dir": "data", "run_id": None, "label": "2x H200", "draft_tokens": 4}
    for source in chapter_sources(repo_root):
        to_notebook(source, notebook := tmp_path / f"{source.stem}.ipynb")
        declared = set(papermill.inspect_notebook(str(notebook)))
        assert declared == set(CHAPTER_PARAMS[source.stem].model_fields), source.stem
        assert set(parameters_for(source.stem, shared)) == declared & set(shared), source.stem
    assert "label" not in parameters_for("04_fusion_vs_elimination", shared)
    assert parameters_for("02_benchmarks", shared)["label"] == "2x H200"


def test_the_example_params_validate_in_live_mode_too(repo_root, tmp_path):
    """The examples say 'set mode: live' (or are live): every chapter then gets what live mode needs (a label),
    checked when the file loads rather than after chapter 02's benchmarks."""
    for example in sorted((repo_root / "examples").glob("*.yaml")):
        data = yaml.safe_load(example.read_text(encoding="utf-8")) | {"mode": "live"}
        path = tmp_path / example.name
        path.write_text(yaml.safe_dump(data))
        load_params(path)
    path.write_text(yaml.safe_dump({"mode": "live", "chapters": {"02_benchmarks": {"model_path": "/m"}}}))
    with pytest.raises(ParameterError, match=r"02_benchmarks: parameter 'label' = ''.*live mode needs"):
        load_params(path)
