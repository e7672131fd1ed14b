"""The case study as the model sees it: reported figures + measured norm cost -> inputs, what-ifs, tables."""

from __future__ import annotations

import pandas as pd

from verifylab.model.costmodel import CaseInputs, scenarios_frame, whatif_scenarios
from verifylab.model.inputs import norm_inputs
from verifylab.model.reconcile import ASSUMED_DRAFT_TOKENS, reconcile, reported_case
from verifylab.store.evidence import Evidence


def case_from_data(ev: Evidence, draft_tokens: int = ASSUMED_DRAFT_TOKENS) -> tuple[CaseInputs, pd.DataFrame]:
    """Model inputs of the reported case (norm cost measured where a run has it) and the figures used."""
    figures = ev.figures
    unfused, fused, source = norm_inputs(ev.runs, draft_tokens)
    return reported_case(figures, unfused, fused, draft_tokens, sources_norm=source), figures


def whatif_table(ev: Evidence, batch: int = 1, draft_tokens: int = ASSUMED_DRAFT_TOKENS) -> pd.DataFrame:
    """The what-if scenarios of the reported case at ``batch`` streams."""
    case, _ = case_from_data(ev, draft_tokens)
    return scenarios_frame(case, whatif_scenarios(case, batch=batch))


def reconcile_table(ev: Evidence, draft_tokens: int = ASSUMED_DRAFT_TOKENS) -> pd.DataFrame:
    """The reconciliation of the reported figures, kernel-fusion saving from the measured norm cost."""
    case, figures = case_from_data(ev, draft_tokens)
    return reconcile(figures, case.norm_us_unfused - case.norm_us_fused, draft_tokens)


def inputs_table(case: CaseInputs) -> pd.DataFrame:
    """Every model input with its value and where it came from."""
    rows = [{"input": k, "value": v} for k, v in case.model_dump(exclude={"sources"}).items()]
    rows += [
        {"input": "allreduces (derived)", "value": case.allreduces},
        {"input": "allreduce_us (derived)", "value": round(case.allreduce_us, 2)},
    ]
    frame = pd.DataFrame(rows)
    frame["source"] = frame["input"].map(
        lambda name: next(
            (src for key, src in case.sources.items() if name.split(" ")[0] in key),
            "design default (Kimi-K2 shape)",
        )
    )
    return frame
