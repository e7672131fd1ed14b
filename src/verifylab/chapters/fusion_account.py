"""Chapter 04's account of the case study: the floors and memory per layout, the account's inputs, the
reconciliation of the reported figures, the ranked hypotheses for the reported jump, the limits, the compute-term
check and the public evidence. Exhibits of chapter 04 (its notebook calls them through its module)."""

from __future__ import annotations

import pandas as pd

from verifylab.analysis.public_evidence import CONTEXT, public_evidence
from verifylab.analysis.regime_finding import reconciliation_words
from verifylab.chapters._base import shown_as_table
from verifylab.comm.bands import bands_from_public
from verifylab.derived import derived
from verifylab.errors import ManifestError
from verifylab.model.answers.decision import REFERENCE_MESSAGE
from verifylab.model.views import (
    CONCLUSIONS,
    ORDER_RULE,
    RTX_PRO_6000_BLACKWELL_GBS,
    compute_validation,
    compute_validation_finding,
    deciding_between_top_two,
    floors_table,
    inputs,
    inputs_table,
    limits_table,
    memory_table,
    ranked_hypotheses,
    reconcile_table,
    stored_inputs,
)
from verifylab.report.section import Prose
from verifylab.report.tables import Table
from verifylab.store.evidence import Evidence

ALLREDUCE_FLOOR_US = 10.0  # one-hop latency floor assumed in the limits table


@shown_as_table
def floors(ev: Evidence) -> pd.DataFrame:
    """Table: the bytes the busiest GPU reads per pass and the time at peak bandwidth (modelled)."""
    return floors_table().round(3)


@shown_as_table
def memory(ev: Evidence) -> pd.DataFrame:
    """Table: weights per GPU in GiB, the KV room left and the requests it holds, per layout (modelled)."""
    return memory_table().round(1)


@shown_as_table
def model_inputs(ev: Evidence) -> pd.DataFrame:
    """Table: every input of the cycle account and the options, with its source."""
    return inputs_table(stored_inputs(ev))


def reconciliation_finding(ev: Evidence) -> Prose:
    """Finding: what the reconciliation of the reported figures concludes (from the cycle account)."""
    return Prose(reconciliation_words(ev))


@shown_as_table
def reconciliation(ev: Evidence) -> pd.DataFrame:
    """Table: the reconciliation of the reported figures, arithmetic shown, every number from the account."""
    return reconcile_table(stored_inputs(ev))[["step", "arithmetic", "verdict", "figures"]]


@shown_as_table
def reconciliation_summary(ev: Evidence) -> pd.DataFrame:
    """Table: the reconciliation's conclusions (its rows the decision page cites), the bottom line first."""
    steps = reconcile_table(stored_inputs(ev)).set_index("step")
    return steps.loc[list(CONCLUSIONS), ["arithmetic", "verdict"]].reset_index()


@shown_as_table
def hypotheses(ev: Evidence) -> pd.DataFrame:
    """Table: what can carry the reported jump, ranked by its evidence: what supports and what contradicts each,
    how much it could explain, and the measurement that decides it."""
    frame = ranked_hypotheses(stored_inputs(ev))
    return frame[
        ["rank", "hypothesis", "score", "for", "against", "could_explain_ms", "of_removed", "deciding_measurement"]
    ].rename(columns={"score": "evidence weight"})


def hypotheses_order(ev: Evidence) -> Prose:
    """The rule that orders the hypotheses, and the measurement that tells the top two apart."""
    ranked = ranked_hypotheses(stored_inputs(ev))
    return Prose(f"The hypotheses are {ORDER_RULE}. {deciding_between_top_two(ranked)}")


@shown_as_table
def limits(ev: Evidence) -> pd.DataFrame:
    """Table: the floor of a one-token decode step, at the datasheet and at the measured bandwidth."""
    run = ev.newest_with("ceilings")
    if run is None:
        raise ManifestError(f"no run under {ev.runs.root} holds table 'ceilings' (the H200 copy bandwidth)")
    ceilings = ev.runs.read_table(run, "ceilings")
    return limits_table(
        {
            "RTX PRO 6000 Blackwell (datasheet)": (RTX_PRO_6000_BLACKWELL_GBS, "reported: NVIDIA datasheet"),
            "H200 (measured copy bandwidth)": (float(ceilings["copy_bandwidth_gbs"].iloc[0]), f"measured: run {run}"),
        },
        allreduce_floor_us=ALLREDUCE_FLOOR_US,
    ).round(2)


@derived
def _compute_check(ev: Evidence) -> pd.DataFrame:
    return compute_validation(ev.newest_table("shard_compute"))


def compute_check_finding(ev: Evidence) -> Prose:
    """Finding: where the bytes-read compute model holds and where it misses."""
    return Prose(compute_validation_finding(_compute_check(ev)))


@shown_as_table
def compute_check(ev: Evidence) -> pd.DataFrame:
    """Table: the compute term fitted on two token counts, checked on the others."""
    return _compute_check(ev).round(4)


def _public_evidence(ev: Evidence) -> pd.DataFrame:
    uses = inputs(stored_inputs(ev)).curves.public_uses()
    return public_evidence(ev.public, uses, bands_from_public(ev.public, REFERENCE_MESSAGE))


def public_evidence_finding(ev: Evidence) -> Prose:
    """Finding: how many public figures price the answers, from how many sources, and how to follow each."""
    frame = _public_evidence(ev)
    pricing = frame[frame["prices"] != CONTEXT]
    sources = ev.public.loc[ev.public["id"].isin(pricing["id"]), "url"].nunique()
    return Prose(
        f"{len(pricing)} of the {len(frame)} public figures price an answer of this book, from {sources} sources; "
        "the rest are context. Each row links its source and quotes the words that carry its number (at most 30); "
        "what it prices is read from the model's own curves and bands."
    )


def public_evidence_table(ev: Evidence) -> Table:
    """Table: every public figure by regime, its source as a link, its quote and what it prices (reported, public)."""
    return Table(_public_evidence(ev), noted=("hardware",), spanned="source_and_quote")
