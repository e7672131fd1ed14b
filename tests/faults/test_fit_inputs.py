"""Issue 53 class 5 (trusted without a check), the speculation fit's side: at dc55d9b the fit took the oldest grid run
whatever it was (a test double's too), and a server that ignored the accept length asked of it was fitted as a sweep
at that length and refitted every box. The boundary: ``model.speculation_inputs`` (``grid_runs`` leaves out runs
marked mechanics only; ``sweeps`` leaves out a server whose measured accept length misses its target by more than
``ACCEPT_TOLERANCE``), and the fit names the run it was made on."""

from __future__ import annotations

from dataclasses import replace

from tests.test_speculation_model import QWEN3_MOE, _synthetic_grid
from verifylab.model.fits.grid import first_grid_fit
from verifylab.model.inputs.configs import costs_from_config
from verifylab.model.inputs.gpus import gpu_named
from verifylab.model.inputs.grids import grid_runs, sweeps
from verifylab.model.inputs.model_costs import Routing
from verifylab.model.inputs.stored import stored_runs
from verifylab.model.pricing.pricer import Box
from verifylab.sources import MeasuredRuns


def _grid(**fields) -> MeasuredRuns:
    target = costs_from_config(QWEN3_MOE)
    draft = costs_from_config({**QWEN3_MOE, "num_hidden_layers": 1, "num_experts": 0})
    box = Box(target, gpu_named("h200"), draft=draft, context=114.0, routing=Routing.COLLAPSED)
    runs = _synthetic_grid(2.5, 0.03, 2.4, 0.19, box)
    return MeasuredRuns([replace(r, **fields) for r in runs.runs], "frames")


def test_a_test_doubles_grid_is_never_fitted():
    double = _grid(mechanics_only=True)
    assert grid_runs(double) == [] and first_grid_fit(stored_runs(double)) is None
    real = _grid()
    fit = first_grid_fit(stored_runs(real))
    assert fit is not None and fit.run_id == "synthetic"  # the fit names its run


def test_a_server_that_ignored_its_accept_length_is_no_sweep_at_it():
    runs = _grid()
    honest = {s.variant for s in sweeps(runs, "synthetic")}
    assert "eagle3_d4_a3p00" in honest
    run = runs.run("synthetic")
    tables = {t: run.load(t) for t in run.tables}
    for name, frame in tables.items():  # the accept-3 server verified every token alone: accept 1, not 3
        if name.startswith("sweep-eagle3_d4_a3p00"):
            frame["spec_verify_ct"] = frame["output_tokens"]
    lying = MeasuredRuns.of_frames({"synthetic": tables}, gpu_name=run.gpu_name, parameters=dict(run.parameters))
    assert "eagle3_d4_a3p00" not in {s.variant for s in sweeps(lying, "synthetic")}
