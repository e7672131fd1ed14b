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
