"""Chapter 04, fusion vs elimination: the two-H200 measurement and its prediction, the cost model's inputs,
what-ifs and reconciliation of the reported figures, the hypotheses, the floor, and the compute-term check."""

from __future__ import annotations

import pandas as pd

from verifylab.chapters.params import FusionVsElimination as Params
from verifylab.model.case import case_from_data, inputs_table, reconcile_table, whatif_table
from verifylab.model.costmodel import components_long
from verifylab.model.inputs import compute_validation
from verifylab.model.limits import RTX_PRO_6000_BLACKWELL_GBS, limits_table
from verifylab.model.reconcile import HYPOTHESES
from verifylab.report import comm_measured
from verifylab.report.charts import Figure, verify_components_chart
from verifylab.report.section import Prose
from verifylab.store.evidence import Evidence

__all__ = ["Params"]

MEASURED_TOKENS = 16  # the draft-token count the measured finding quotes
WHATIF_COLUMNS = [
    "name",
    "kind",
    "allreduces_per_pass",
    "allreduce_us",
    "compute_ms",
    "allreduce_ms",
    "norm_ms",
    "verify_ms",
    "eagle3_tokens_per_s",
    "provenance",
]
ALLREDUCE_FLOOR_US = 10.0  # one-hop latency floor assumed in the limits table


def _gains(ev: Evidence) -> pd.DataFrame:
    return ev.derived("fusion_vs_elimination", lambda e: comm_measured.fusion_vs_elimination_measured(e.runs))


def measured_finding(ev: Evidence) -> Prose:
    """Finding: what fusion and elimination saved on the two-H200 verify pass."""
    return comm_measured.comm_finding(_gains(ev), tokens=MEASURED_TOKENS)


def measured_table(ev: Evidence) -> pd.DataFrame:
    """Table: pass time per variant and token count, measured."""
    return comm_measured.fusion_vs_elimination_table(_gains(ev))


def measured_figure(ev: Evidence) -> Figure:
    """Figure: fusion vs elimination, measured."""
    return comm_measured.fusion_vs_elimination_chart(_gains(ev))


def _prediction(ev: Evidence) -> pd.DataFrame:
    return ev.derived("prediction_check", lambda e: comm_measured.prediction_check(e.runs))


def prediction_finding(ev: Evidence) -> Prose:
    """Finding: how well the pass model predicts the measured passes."""
    return comm_measured.prediction_finding(_prediction(ev))


def prediction_table(ev: Evidence) -> pd.DataFrame:
    """Table: predicted vs measured pass time per variant."""
    return comm_measured.prediction_table(_prediction(ev))


def model_inputs(ev: Evidence, params: Params) -> pd.DataFrame:
    """Table: every cost-model input with its value and source."""
    case, _ = case_from_data(ev, params.draft_tokens)
    return inputs_table(case)


def _scenarios(ev: Evidence, params: Params) -> pd.DataFrame:
    key = f"whatif/{params.batch}/{params.draft_tokens}"
    return ev.derived(key, lambda e: whatif_table(e, batch=params.batch, draft_tokens=params.draft_tokens))


def whatif(ev: Evidence, params: Params) -> pd.DataFrame:
    """Table: the verify pass under each mechanism (modelled)."""
    return _scenarios(ev, params)[WHATIF_COLUMNS].round(2)


def whatif_figure(ev: Evidence, params: Params) -> Figure:
    """Figure: the what-if passes split into compute, all-reduce and norm."""
    return verify_components_chart(components_long(_scenarios(ev, params)))


def reconciliation(ev: Evidence, params: Params) -> pd.DataFrame:
    """Table: the reconciliation of the reported figures, arithmetic shown."""
    return reconcile_table(ev, params.draft_tokens)[["step", "arithmetic", "verdict", "figures"]]


def hypotheses() -> pd.DataFrame:
    """Table: why verify all-reduces may be slower than decode's, and the measurement that settles each."""
    return HYPOTHESES


def limits(ev: Evidence) -> pd.DataFrame:
    """Table: the floor of a one-token decode step, at the datasheet and at the measured bandwidth."""
    ceilings = ev.newest_table("ceilings")
    return limits_table(
        {
            "RTX PRO 6000 Blackwell (datasheet)": (RTX_PRO_6000_BLACKWELL_GBS, "reported: NVIDIA datasheet"),
            "H200 (measured copy bandwidth)": (float(ceilings["copy_bandwidth_gbs"].iloc[0]), "measured"),
        },
        allreduce_floor_us=ALLREDUCE_FLOOR_US,
    ).round(2)


def compute_check(ev: Evidence) -> pd.DataFrame:
    """Table: the compute term fitted on two token counts, checked on the others."""
    return compute_validation(ev.newest_table("shard_compute")).round(4)
