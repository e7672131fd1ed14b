"""The cost model called with values: the same decision from frames held in memory as from the data folder, and
runs read as values behave as the store does (newest, missing tables, unknown runs)."""

from __future__ import annotations

import pandas as pd
import pytest

from verifylab.errors import ManifestError, ReferenceDataError, RunNotFoundError
from verifylab.model.answers.decision import decision_table
from verifylab.model.fits.pass_check import saving_check
from verifylab.model.inputs.curves import norm_us_measured
from verifylab.model.inputs.stored import stored_runs
from verifylab.reported import reported_value
from verifylab.sources import MeasuredRun, MeasuredRuns, SourcesInMemory
from verifylab.store.evidence import Evidence


def in_memory(ev: Evidence) -> SourcesInMemory:
    """Every run table and figure of ``ev`` copied into memory: nothing left that points at a file."""
    store, runs = ev.runs, []
    for m in store.manifests():
        frames = {t: store.read_table(m.run_id, t) for t in m.tables}
        load = lambda name, f=frames: f[name].copy()  # noqa: E731
        run = MeasuredRun(
            m.run_id, frozenset(frames), load, m.created, m.label, m.mechanics_only, m.gpu_name or "", m.parameters
        )
        runs.append(run)
    return SourcesInMemory(
        ev.figures.copy(),
        ev.public.copy(),
        MeasuredRuns(runs, "memory"),
        ev.fusion_forensics,
        public_speculation=ev.public_speculation.copy(),
        public_context=ev.public_context.copy(),
    )


def test_the_decision_from_values_equals_the_decision_from_the_data_folder(data_dir):
    ev = Evidence(data_dir)
    pd.testing.assert_frame_equal(decision_table(in_memory(ev)), decision_table(ev))


def test_measured_runs_from_frames_answer_like_the_store():
    norm = pd.DataFrame({"tokens": [1, 16], "fused_us": [2.0, 8.0]})
    runs = MeasuredRuns.of_frames(
        {"run-a": {"norm_fusion": norm}, "run-b": {"norm_fusion": norm.assign(fused_us=[4.0, 16.0])}}
    )
    assert runs.newest_with("norm_fusion") == "run-b"  # made last
    us, source = norm_us_measured(runs, 16)
    assert us == pytest.approx(16.0) and "run-b" in source
    assert runs.table_or_none("run-a", "verify_pass") is None
    with pytest.raises(ManifestError, match="run 'run-a' has no table 'verify_pass'"):
        runs.read_table("run-a", "verify_pass")
    with pytest.raises(RunNotFoundError, match="run 'run-c' not found in frames given in memory"):
        runs.run("run-c")
    edited = runs.read_table("run-a", "norm_fusion")
    edited.loc[0, "fused_us"] = 99.0  # a caller's edit never reaches the run
    assert runs.read_table("run-a", "norm_fusion")["fused_us"].iloc[0] == 2.0


def test_no_campaign_no_saving_check_and_an_unknown_figure_is_named():
    assert saving_check(stored_runs(MeasuredRuns([]))).empty
    with pytest.raises(ReferenceDataError, match="'nope'"):
        reported_value(pd.DataFrame({"figure_id": ["a"], "value": [1.0]}), "nope")
