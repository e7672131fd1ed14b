"""The read-only view of the model for the book's exhibits: what ``analysis/`` and ``chapters/`` may read below the
answers (the fits with what they fitted and held out, the case study's tables and account, the inputs read), so that
an exhibit can show predicted beside measured. Nothing here decides: a decision the book or a command gives comes
from :mod:`verifylab.model.answers` (``tests/test_layers.py`` holds both doors)."""

from __future__ import annotations

from verifylab.model.case.cycle import CycleAccount, cycle_account
from verifylab.model.case.hypotheses import ORDER_RULE, deciding_between_top_two, ranked_hypotheses
from verifylab.model.case.option_tables import (
    components_long,
    floors_table,
    memory_table,
    plain_decoding,
    regime_curves_table,
)
from verifylab.model.case.options import OPTIONS, Option, reported_pass_floor
from verifylab.model.case.reconcile import CONCLUSIONS
from verifylab.model.case.speculation import inputs, speculation_case
from verifylab.model.case.whatif import case_option_boxes, inputs_table, options_at_loads, reconcile_table, whatif_table
from verifylab.model.fits.compute_check import compute_validation, compute_validation_finding
from verifylab.model.fits.context import context_check, crossover_check, fitted_matrix
from verifylab.model.fits.context_profiles import error_profiles
from verifylab.model.fits.engine_reads import attention_growth, context_cells, expert_reads
from verifylab.model.fits.grid import FIT_ACCEPT, check_grid_fit, fit_for, fit_grid
from verifylab.model.fits.in_pass import fused_in_pass_fit
from verifylab.model.fits.live_fusion import live_fusion_check, live_fusion_finding
from verifylab.model.fits.overlap import OverlapFit, check_summary, fitted_overlap, public_check
from verifylab.model.fits.pass_check import saving_check, validate_against_run
from verifylab.model.fits.verify_growth import FIT_CONTEXT_MAX, context_growth_fit, stored_growth_check
from verifylab.model.fits.verify_kernels import kernel_cells, serial_kernel_fit
from verifylab.model.inputs.gpus import RTX_PRO_6000_BLACKWELL_GBS, gpu_title
from verifylab.model.inputs.grids import grid_requests, grid_routing, grid_runs, sweeps, token_weighted_accept
from verifylab.model.inputs.model_costs import Routing
from verifylab.model.inputs.stored import stored_inputs, stored_runs
from verifylab.model.pricing.boxes import calibrate_decode
from verifylab.model.pricing.floors import limits_table
from verifylab.model.pricing.regimes import REGIME_TITLE
from verifylab.model.pricing.speculation import crossover_streams, gain_flag, gains

__all__ = [
    "CONCLUSIONS",
    "FIT_ACCEPT",
    "FIT_CONTEXT_MAX",
    "OPTIONS",
    "ORDER_RULE",
    "REGIME_TITLE",
    "RTX_PRO_6000_BLACKWELL_GBS",
    "CycleAccount",
    "Option",
    "OverlapFit",
    "Routing",
    "attention_growth",
    "calibrate_decode",
    "case_option_boxes",
    "check_grid_fit",
    "check_summary",
    "components_long",
    "compute_validation",
    "compute_validation_finding",
    "context_cells",
    "context_check",
    "context_growth_fit",
    "crossover_check",
    "crossover_streams",
    "cycle_account",
    "deciding_between_top_two",
    "error_profiles",
    "expert_reads",
    "fit_for",
    "fit_grid",
    "fitted_matrix",
    "fitted_overlap",
    "floors_table",
    "fused_in_pass_fit",
    "gain_flag",
    "gains",
    "gpu_title",
    "grid_requests",
    "grid_routing",
    "grid_runs",
    "inputs",
    "inputs_table",
    "kernel_cells",
    "limits_table",
    "live_fusion_check",
    "live_fusion_finding",
    "memory_table",
    "options_at_loads",
    "plain_decoding",
    "public_check",
    "ranked_hypotheses",
    "reconcile_table",
    "regime_curves_table",
    "reported_pass_floor",
    "saving_check",
    "serial_kernel_fit",
    "speculation_case",
    "stored_growth_check",
    "stored_inputs",
    "stored_runs",
    "sweeps",
    "token_weighted_accept",
    "validate_against_run",
    "whatif_table",
]
