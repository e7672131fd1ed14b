"""Chapter 04, fusion vs elimination: the decision per communication regime, the options priced within physical
floors at 1, 8 and 32 streams, the regime curves they are priced from, the two-H200 measurement and its
prediction, the account's inputs, the reconciliation, the ranked hypotheses for the reported jump, the floors and
the compute-term check."""

from __future__ import annotations

import pandas as pd

from verifylab.analysis import comm_campaign, context_views, engine_reads, public_curves
from verifylab.analysis import verify_kernels as kernels
from verifylab.analysis.model_charts import (
    context_gain_chart,
    error_profile_chart,
    options_chart,
    regime_curves_chart,
    throughput_pareto_chart,
)
from verifylab.analysis.regime_finding import options_by_load_words, regime_finding_words
from verifylab.chapters._base import shown_as_table
from verifylab.chapters.fusion_account import (  # noqa: F401  the account's exhibits: the notebook calls them here
    ALLREDUCE_FLOOR_US,
    compute_check,
    compute_check_finding,
    floors,
    hypotheses,
    hypotheses_order,
    limits,
    memory,
    model_inputs,
    public_evidence_finding,
    public_evidence_table,
    reconciliation,
    reconciliation_finding,
    reconciliation_summary,
)
from verifylab.chapters.params import FusionVsElimination as Params
from verifylab.derived import derived
from verifylab.model.answers.decision import decision_table, fusion_by_load, speculation_by_accept
from verifylab.model.answers.routing_overlap import speculation_by_overlap
from verifylab.model.views import (
    OPTIONS,
    Option,
    case_option_boxes,
    components_long,
    context_check,
    error_profiles,
    fitted_overlap,
    inputs,
    options_at_loads,
    plain_decoding,
    public_check,
    regime_curves_table,
    speculation_case,
    stored_inputs,
    stored_runs,
    whatif_table,
)
from verifylab.model.views import saving_check as check
from verifylab.report.charts import Figure, verify_components_chart
from verifylab.report.section import Prose
from verifylab.report.tables import Table
from verifylab.store.evidence import Evidence
from verifylab.vocab import LOAD_STREAMS, PCIE_IPC_FLASHINFER, PCIE_IPC_SGLANG, Regime, streams_words

__all__ = ["Params"]

MEASURED_TOKENS = 16  # the draft-token count the measured finding quotes
LOADS = LOAD_STREAMS  # concurrent streams the finding and the load table show
DECISION_HEADINGS = {
    "allreduce_57kb_us": "8-rank all-reduce, one stream's verify message (µs)",
    "decode_tok_s": "plain decoding (tok/s)",
    "eagle3_tok_s": "EAGLE-3 (tok/s)",
    "eagle3_gain_x": "EAGLE-3 over plain decoding (x): each end is the tok/s ends' ratio",
    "eagle3_fusion_tok_s": "EAGLE-3 + fusion (tok/s)",
    "fusion_saves_ms": "fusion saves per verify pass, by draft tokens (ms)",
    "pcie_ipc_decode_tok_s": f"plain decoding on the PCIe-IPC all-reduce (tok/s; SGLang {PCIE_IPC_SGLANG}+, "
    f"FlashInfer {PCIE_IPC_FLASHINFER}+)",
    "pcie_ipc_eagle3_tok_s": "EAGLE-3 on the PCIe-IPC all-reduce (tok/s)",
    "pcie_ipc_gain_x": "EAGLE-3 over plain decoding, both on PCIe-IPC (x)",
    "fastest_at": "fastest option SGLang runs with EAGLE-3, by streams",
    "speculation_off_from": "speculation stops paying",
}


@derived
def _gains(ev: Evidence) -> pd.DataFrame:
    return comm_campaign.fusion_vs_elimination_measured(ev.runs)


@derived
def _savings_over_runs(ev: Evidence) -> pd.DataFrame:
    return comm_campaign.savings_over_runs(ev.runs)


def measured_finding(ev: Evidence) -> Prose:
    """Finding: what fusion and elimination saved on the two-H200 verify pass."""
    spread = _savings_over_runs(ev)
    return comm_campaign.comm_finding(_gains(ev), tokens=MEASURED_TOKENS, spread=spread)


@shown_as_table
def measured_table(ev: Evidence) -> pd.DataFrame:
    """Table: pass time per variant and token count, measured."""
    return comm_campaign.fusion_vs_elimination_table(_gains(ev))


def measured_figure(ev: Evidence) -> Figure:
    """Figure: fusion vs elimination, measured."""
    return comm_campaign.fusion_vs_elimination_chart(_gains(ev))


@derived
def _prediction(ev: Evidence) -> pd.DataFrame:
    return comm_campaign.prediction_check(ev.measured)


def prediction_finding(ev: Evidence) -> Prose:
    """Finding: how well the pass model predicts the measured passes."""
    return comm_campaign.prediction_finding(_prediction(ev))


@shown_as_table
def prediction_table(ev: Evidence) -> pd.DataFrame:
    """Table: predicted vs measured pass time per variant."""
    return comm_campaign.prediction_table(_prediction(ev))


@shown_as_table
def saving_check(ev: Evidence) -> pd.DataFrame:
    """Table: each variant's saving against NCCL, predicted with in-pass costs, against the measured range."""

    return check(stored_runs(ev.measured)).round(3)


def finding(ev: Evidence, params: Params) -> Prose:
    """Finding: the decision depends on the box's regime; each regime's answer in numbers; the case study's."""
    return Prose(regime_finding_words(ev, LOADS))


@shown_as_table
def decision_by_regime(ev: Evidence) -> pd.DataFrame:
    """Table: per regime, the all-reduce band that identifies it, decoding vs EAGLE-3 (with and without fusion)
    at one stream, the fastest option by load, and where speculation stops paying (modelled)."""
    return decision_table(ev).drop(columns=["regime_key", *PCIE_IPC_COLUMNS]).rename(columns=DECISION_HEADINGS)


PCIE_IPC_COLUMNS = ("pcie_ipc_decode_tok_s", "pcie_ipc_eagle3_tok_s", "pcie_ipc_gain_x")


@shown_as_table
def pcie_ipc_by_regime(ev: Evidence) -> pd.DataFrame:
    """Table: per regime, plain decoding and EAGLE-3 at one stream with SGLang's PCIe-IPC all-reduce in place of
    NCCL, against NCCL as run (modelled from the collective's own public curve)."""
    table = decision_table(ev)
    return table[["regime", "decode_tok_s", "eagle3_tok_s", *PCIE_IPC_COLUMNS, "provenance"]].rename(
        columns=DECISION_HEADINGS
    )


@shown_as_table
def fusion_by_load_table(ev: Evidence) -> pd.DataFrame:
    """Table: per regime, stream count and draft-token count, what fusion saves on a verify pass (NCCL and fused at
    the same tokens) and whether to turn it on (modelled)."""
    return fusion_by_load(ev)


def case_pareto_figure(ev: Evidence) -> Figure:
    """Figure: per-user against total tok/s, plain decoding and EAGLE-3, per regime (modelled)."""
    cases = speculation_case(stored_inputs(ev)).values()
    return throughput_pareto_chart(pd.concat([case.throughput() for case in cases]))


@shown_as_table
def speculation_by_accept_length(ev: Evidence) -> pd.DataFrame:
    """Table: where speculation stops paying on the case study's box per regime and accept length (modelled)."""
    return speculation_by_accept(ev)


@shown_as_table
def speculation_by_routing_overlap(ev: Evidence) -> pd.DataFrame:
    """Table: the case study's speculation answer per regime and routing overlap, each overlap's source named."""
    return speculation_by_overlap(ev)


def public_speculation_finding(ev: Evidence) -> Prose:
    """Finding: the routing overlap fitted on the public curves of other models, and how the model then meets the
    curves it was not fitted on, the case-study family's among them (formatted from the public table)."""
    return Prose(public_curves.finding_words(fitted_overlap(stored_inputs(ev)), public_check(stored_inputs(ev))))


def public_speculation_curves(ev: Evidence) -> Table:
    """Table: each public curve, its role (fitted on, held out, family check), its box and source, the model's median
    error on it and where its gain crosses 1, reported beside predicted (reported, public; modelled)."""
    view = public_curves.curves_view(public_check(stored_inputs(ev)))
    if view.empty:
        return Table(view)
    engine, accept, source = (view[c] for c in public_curves.CURVE_NOTES)
    read = [f"engine: {e}; accept length: {a}; {s}" for e, a, s in zip(engine, accept, source, strict=True)]
    # the engine, how the accept length was read and the source as one line under each row: the row's model,
    # hardware and prediction keep the width (as notes they hid the key row)
    return Table(view.drop(columns=list(public_curves.CURVE_NOTES)).assign(how_read=read), spanned="how_read")


def public_speculation_cells(ev: Evidence) -> Table:
    """Table: every public cell, reported gain beside the model's range at the fitted overlap (modelled)."""
    return Table(public_curves.cells_view(public_check(stored_inputs(ev))), spanned="source_and_quote")


def engine_attention_finding(ev: Evidence) -> Prose:
    """Finding: what a stream's context adds to SGLang's verify pass on one H200, per backend, beside the model's
    prediction committed before the run (formatted from the runs' tables)."""
    return Prose(engine_reads.attention_words(ev.measured))


def verify_kernels_finding(ev: Evidence) -> Prose:
    """Finding: each verify kernel's correctness and its time per layer at long context beside its price."""
    return Prose(kernels.kernel_words(ev.measured))


def verify_kernels(ev: Evidence) -> Table:
    """Table: one layer's verify per kernel and shape (one stream): verdict, worst error, time, the model's price."""
    return Table(kernels.kernel_view(ev.measured), noted=("run",))


def verify_kernel_refit_finding(ev: Evidence) -> Prose:
    """Finding: the serial kernel's model refitted on the kernel cells, what it fitted and what it held out."""
    return Prose(kernels.refit_words(ev.measured))


def verify_kernel_refit(ev: Evidence) -> Table:
    """Table: the serial kernel's held-out cells at the longest context, measured beside the refitted model."""
    return Table(kernels.refit_view(ev.measured), noted=("run",))


def verify_growth_finding(ev: Evidence) -> Prose:
    """Finding: a verify cycle's growth with context inside SGLang per kernel, predicted before the runs and refitted
    on the shorter contexts with the longer ones held out."""
    return Prose(kernels.growth_words(ev.measured))


def verify_growth_check(ev: Evidence) -> Table:
    """Table: an EAGLE-3 cycle's growth from 2k to 64k per kernel and target depth, measured beside the prediction
    committed before the run."""
    return Table(kernels.growth_check_view(ev.measured), noted=("run",))


def verify_growth_fit(ev: Evidence) -> Table:
    """Table: every engine cell above the fitted contexts, measured beside the range refitted on its series'
    shorter contexts."""
    return Table(kernels.growth_fit_view(ev.measured), noted=("run",))


def engine_experts_finding(ev: Evidence) -> Prose:
    """Finding: the experts SGLang's verify pass reads, counted by its recorder, beside the model's overlaps."""
    return Prose(engine_reads.experts_words(ev.measured))


def engine_attention(ev: Evidence) -> Table:
    """Table: the growth per 1,000 tokens of a stream's context of a plain step and a verify cycle, per target,
    backend and streams, beside the model's (measured; modelled)."""
    return Table(engine_reads.attention_view(ev.measured), noted=("run",))


def engine_experts(ev: Evidence) -> Table:
    """Table: the experts a verify pass reads against independent and chain-shared tokens, beside the model's
    predictions at overlaps 0, 1 and the fitted range (measured; modelled)."""
    return Table(engine_reads.experts_view(ev.measured))


def context_finding(ev: Evidence) -> Prose:
    """Finding: what a stream's context adds on the case-study hardware and family (public matrix), how the model
    meets the cells it never saw, what it assumed (formatted from the tables below)."""
    return Prose(context_views.context_words(ev))


def context_terms_table(ev: Evidence) -> Table:
    """Table: the fitted context terms and what the fit assumed (reported, public; modelled)."""
    return Table(context_views.fit_view(ev), noted=("how", "source"))


def context_crossovers(ev: Evidence) -> Table:
    """Table: where speculation stops paying per matrix and context, reported beside predicted."""
    return Table(context_views.crossover_view(ev))


def context_gain_figure(ev: Evidence) -> Figure:
    """Figure: the gain by streams per matrix and context, reported cells beside the predicted band."""
    return context_gain_chart(context_check(stored_inputs(ev)))


def context_cells(ev: Evidence) -> Table:
    """Table: every cell of every matrix, reported beside predicted (reported, public; modelled)."""
    return Table(context_views.cells_view(ev))


def context_profiles(ev: Evidence) -> Figure:
    """Figure: each context term's error profile across its range, the value used marked."""
    return error_profile_chart(error_profiles(stored_inputs(ev)))


def regime_figure(ev: Evidence) -> Figure:
    """Figure: one all-reduce by message size in each regime (the curves every option is priced from)."""
    return regime_curves_chart(regime_curves_table(inputs(stored_inputs(ev)).curves))


def options_finding(ev: Evidence) -> Prose:
    """Finding: the fastest option per regime and load, as the decision names it."""
    return Prose(options_by_load_words(ev))


def options_at_load(ev: Evidence) -> Table:
    """Table: :func:`options_at_load_frame`, its conditions and reasons as lettered notes below it."""
    return Table(options_at_load_frame(ev), noted=("with EAGLE-3 in SGLang", "not priced because"))


def options_at_load_frame(ev: Evidence) -> pd.DataFrame:
    """Table: every option in every regime at 1, 8 and 32 streams (modelled; :func:`options_at_loads`)."""
    return options_at_loads(stored_inputs(ev), LOADS)


PLAIN_DECODING = "plain decoding (TP 8, NCCL, no speculation)"


def options_figure(ev: Evidence) -> Figure:
    """Figure: every option's one-stream tok/s with EAGLE-3 at 1, 8 and 32 streams beside plain decoding's, one
    panel per regime (modelled)."""
    stored = stored_inputs(ev)
    frames = [whatif_table(stored, streams) for streams in LOADS]
    table = pd.concat(frames, ignore_index=True)
    plain = []
    for regime_key, regime_title in dict(zip(table["regime_key"], table["regime"], strict=True)).items():
        for streams in LOADS:
            rate = plain_decoding(case_option_boxes(stored), Regime(regime_key), streams)
            if rate is not None:
                plain.append(
                    {"regime": regime_title, "option": PLAIN_DECODING, "streams": streams}
                    | {"tokens_per_s_low": rate.low, "tokens_per_s_high": rate.high}
                )
    return options_chart(pd.concat([table, pd.DataFrame(plain)], ignore_index=True))


@shown_as_table
def option_facts() -> pd.DataFrame:
    """Table: what each option removes and adds, its flags, and whether SGLang runs it with EAGLE-3 (read from
    the wheels)."""
    return pd.DataFrame(
        [
            {"option": f.title, "kind": f.kind, "what": f.what, "flags": f.flags, "with EAGLE-3": f.eagle3}
            for f in OPTIONS.values()
        ]
    )


def _terms(ev: Evidence, params: Params) -> pd.DataFrame:
    return whatif_table(stored_inputs(ev), params.batch)


@shown_as_table
def whatif(ev: Evidence, params: Params) -> pd.DataFrame:
    """Table: each option's terms at ``batch`` streams per regime, low and high ends (modelled)."""
    columns = [
        "regime",
        "option",
        "floor_ms_low",
        "compute_ms_low",
        "compute_ms_high",
        "comm_ms_low",
        "comm_ms_high",
        "host_ms_low",
        "host_ms_high",
        "verify_ms_low",
        "verify_ms_high",
        "comm_basis",
    ]
    return _terms(ev, params)[columns].round(2)


def whatif_figure(ev: Evidence, params: Params) -> Figure:
    """Figure: each option's verify pass split into compute, communication and host overhead (midpoints), per
    regime."""
    frame = _terms(ev, params).dropna(subset=["verify_ms_low"])
    comm = (frame["comm_ms_low"] + frame["comm_ms_high"]) / 2
    all_to_all = frame["key"] == Option.DP_ATTENTION_EP8.value  # elimination trades all-reduces for an all-to-all
    frame = pd.DataFrame(
        {
            "name": frame["option"] + " — " + frame["regime"],
            "kind": frame["key"],
            "compute_ms": (frame["compute_ms_low"] + frame["compute_ms_high"]) / 2,
            "all-reduce_ms": comm.where(~all_to_all, 0.0),
            "all-to-all_ms": comm.where(all_to_all, 0.0),
            "host_ms": (frame["host_ms_low"] + frame["host_ms_high"]) / 2,
        }
    )
    return verify_components_chart(components_long(frame), title_note=f" at {streams_words(params.batch)}, midpoints")
