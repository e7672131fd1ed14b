"""The case study's answers the decision page and the edition's findings word: its box (Kimi-K2.5 INT4 over 8 x RTX
PRO 6000, healthy P2P) per context band and engine from the nearest evidence, the backend its launch lines name, the
reported pass's floor and all-reduce, a stored probe of the reader's box and the family's public curve."""

from __future__ import annotations

from dataclasses import dataclass

from verifylab.model.answers.engine_answer import KIMI_ATTENTION, SGLANG_DEFAULT_BACKEND, choice_for, engine_bands
from verifylab.model.answers.evidence_ladder import BandAnswer, BoxSpec, band_answers
from verifylab.model.case.box import CASE_CONTEXT
from verifylab.model.case.cycle import CycleAccount, cycle_account
from verifylab.model.case.options import reported_pass_floor
from verifylab.model.case.speculation import cases_on, decode_rate, inputs
from verifylab.model.fits.overlap import check_summary, public_check
from verifylab.model.inputs.configs import kimi_k25_costs, needs_remote_code
from verifylab.model.inputs.curves import BoxProbe
from verifylab.model.inputs.stored import stored_inputs
from verifylab.model.pricing.regimes import REGIME_TITLE
from verifylab.model.pricing.speculation import SpeculationAnswer
from verifylab.sources import ModelSources
from verifylab.span import Span
from verifylab.vocab import COMMAND_DRAFT_TOKENS, Regime

__all__ = ["CASE_CONTEXT", "REGIME_TITLE"]  # the case's context and the regimes' titles, as the pages name them

CHAIN = COMMAND_DRAFT_TOKENS  # the chain the answers recommend: the public evidence's, and the case study's shortest
CASE_GPU = "rtx-pro-6000"  # the case study's GPU (SM120)
# The engines the bands are given for: SGLang as it runs by default on SM120, SGLang with the best backend the audited
# code admits there, and vLLM as the public matrix ran it
CASE_ENGINES = (("sglang", None), ("sglang", "flashinfer"), ("vllm", None))
KIMI_REMOTE_CODE = needs_remote_code(KIMI_ATTENTION)  # whether the case's model needs --trust-remote-code


def case_bands(ev: ModelSources, engine: str = "sglang", backend: str | None = None) -> list[BandAnswer]:
    """The case study's box per context band, from the nearest evidence, for ``engine`` with ``backend`` (default:
    SGLang's own); the model's answer where none is stored."""
    spec = BoxSpec(kimi_k25_costs(), CASE_GPU, 8, "healthy-p2p", CHAIN)

    def modelled(context: float) -> SpeculationAnswer:
        stored = stored_inputs(ev)
        cases = cases_on(stored, inputs(stored), *decode_rate(stored), context=context)
        case = cases[Regime.HEALTHY_P2P]
        assert case is not None
        return case.by_draft_tokens[CHAIN]

    choice = choice_for(engine, backend, None, None, KIMI_ATTENTION, CASE_GPU, "fp8")
    repriced = engine_bands(ev, choice, KIMI_ATTENTION, spec.target, spec.gpu, spec.tp, "healthy-p2p")
    return band_answers(ev, spec, modelled, repriced)


def answer_backend(ev: ModelSources) -> str:
    """The attention backend the launch lines name: of SGLang's backends in :data:`CASE_ENGINES`, the one on which
    EAGLE-3 pays at the most context bands (SGLang's default on a tie, and where it pays at none)."""
    default = SGLANG_DEFAULT_BACKEND[("MLA", "SM120")]
    paying = {
        backend or default: sum(b.pays for b in case_bands(ev, engine, backend))
        for engine, backend in CASE_ENGINES
        if engine == "sglang"
    }
    return max(paying, key=lambda b: (paying[b], b == default))


def engine_choice_words(engine: str, backend: str | None) -> str:
    """How ``engine`` with ``backend`` runs the case's model on its GPU, in words."""
    return choice_for(engine, backend, None, None, KIMI_ATTENTION, CASE_GPU, "fp8").words()


def probed_box(ev: ModelSources) -> BoxProbe | None:
    """The stored 8-GPU probe of the reader's own box whose curve prices the row 'this box', or None."""
    return inputs(stored_inputs(ev)).curves.box


@dataclass(frozen=True)
class ReportedPass:
    """The case study's cycle account, its verify pass's floor and the all-reduce it implies (compute at its floor)."""

    account: CycleAccount
    floor_ms: Span
    allreduce_us: Span


def reported_pass(ev: ModelSources) -> ReportedPass:
    """The reported verify pass as the model reads it."""
    stored = stored_inputs(ev)
    a = cycle_account(stored)
    low, high, _ = inputs(stored).curves.reported_allreduce or (0.0, 0.0, 0.0)
    return ReportedPass(a, reported_pass_floor(a), Span(low, high))


def family_check(ev: ModelSources) -> dict | None:
    """The case-study family's public curve checked against the model (never in a fit): a row of the check's
    summary, or None where none is stored."""
    table = public_check(stored_inputs(ev))
    if table.empty:
        return None
    summary = check_summary(table)
    family = summary[summary["role"] == "family check"]
    return None if family.empty else family.iloc[0].to_dict()
