"""Each deployment option of the case study priced by the one pricer (:mod:`verifylab.model.pricer`): the case
study's box per regime as the speculation model calibrates it (:mod:`verifylab.model.case_speculation`), changed
only where the option changes it — another collective for the all-reduces (fusion, PCIe-IPC), whole experts on
their GPUs (EP), attention per request with all-to-alls instead of all-reduces (DP attention + EP), a pipeline of two
stages of four GPUs (TP 4 x PP 2). The host overhead is the one calibrated on the NCCL box, carried over as a fixed
range: an option's saving is never absorbed into it."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import product

from verifylab.model.case.box import CASE_CONTEXT
from verifylab.model.case.options import GPUS, MOE_LAYERS, ModelInputs, Option
from verifylab.model.case.speculation import SpeculationCase, cases_on
from verifylab.model.inputs.gpus import RTX_PRO_6000_BLACKWELL_GBS
from verifylab.model.inputs.model_costs import Layout
from verifylab.model.inputs.stored import StoredInputs
from verifylab.model.pricing.boxes import carried_host
from verifylab.model.pricing.collectives import RegimeCurves
from verifylab.model.pricing.pricer import (
    Box,
    Overheads,
    PassComm,
    floor_ms,
    micro_batches,
    price_verify,
    scenarios,
)
from verifylab.model.pricing.regimes import Collective, Price
from verifylab.model.pricing.speculation import gains
from verifylab.shapes import KIMI_K2
from verifylab.span import Span, times
from verifylab.vocab import KIMI_K2_ALLREDUCES_PER_PASS, KIMI_K2_HIDDEN, Drafter, Regime

PP_STAGES, PP_TP = 2, 4


PP_STAGES, PP_TP = 2, 4


@dataclass(frozen=True)
class OptionBoxes:
    """The case study's box per regime on each collective, calibrated once: what every option is priced on."""

    inputs: ModelInputs
    nccl: dict[Regime, SpeculationCase]
    fused: dict[Regime, SpeculationCase | None]
    pcie_ipc: dict[Regime, SpeculationCase | None]

    @property
    def curves(self) -> RegimeCurves:
        return self.inputs.curves


def option_boxes(
    stored: StoredInputs, inputs: ModelInputs, decode_tps: float, decode_source: str, context: float = CASE_CONTEXT
) -> OptionBoxes:
    """The boxes of ``inputs``' regimes, calibrated to plain decoding at ``decode_tps`` (from ``decode_source``), each
    stream holding ``context`` tokens."""
    nccl_cases = cases_on(stored, inputs, decode_tps, decode_source, context=context)
    nccl = {r: c for r, c in nccl_cases.items() if c is not None}
    fused = cases_on(stored, inputs, decode_tps, decode_source, collective=Collective.FUSED, context=context)
    pcie = cases_on(stored, inputs, decode_tps, decode_source, collective=Collective.PCIE_IPC, context=context)
    return OptionBoxes(inputs, nccl, fused, pcie)


@dataclass(frozen=True)
class OptionPass:
    """One option's verify pass in one regime at ``streams`` x ``k`` tokens: each term a range over every input's
    ends, and one stream's tok/s, plain and with EAGLE-3 (None where the option cannot run there)."""

    option: Option
    regime: Regime
    streams: int
    k: int
    floor_ms: float  # the bytes of the busiest GPU at the card's datasheet bandwidth
    compute: Span  # the same bytes at the effective bandwidth, and the arithmetic
    comm: Span | None
    host: Span
    collectives: int
    allreduces: int
    basis: str
    plain_per_stream: Span | None = None
    eagle3_per_stream: Span | None = None
    not_priced: str = ""

    @property
    def verify(self) -> Span | None:
        if self.comm is None:
            return None
        return Span(
            self.compute.low + self.comm.low + self.host.low, self.compute.high + self.comm.high + self.host.high
        )


def _a2a_count() -> int:
    return 2 * MOE_LAYERS  # a dispatch and a combine per MoE layer


def _dp_comm(curves: RegimeCurves, regime: Regime) -> tuple[PassComm, str] | str:
    """DP attention + EP 8's collectives per pass: a dispatch and a combine all-to-all per MoE layer, each GPU's
    own streams' tokens to the experts of (at most) seven others."""
    probe = curves.price(regime, Collective.ALL_TO_ALL, GPUS, 1.0)
    if isinstance(probe, str):
        return probe

    def per_pass(tokens: float, streams: float) -> Span:
        local = math.ceil(streams / GPUS) * tokens / max(streams, 1.0)
        message = local * min(KIMI_K2.experts_per_token, GPUS - 1) * KIMI_K2_HIDDEN * 2
        price = curves.price(regime, Collective.ALL_TO_ALL, GPUS, message)
        assert isinstance(price, Price)  # priced at one size, priced at all
        return Span(_a2a_count() * price.low_us, _a2a_count() * price.high_us)

    return per_pass, probe.basis


def _pp_comm(curves: RegimeCurves, regime: Regime) -> tuple[PassComm, str] | str:
    """TP 4 x PP 2's collectives per pass: every layer's two all-reduces among four GPUs at a micro-batch's message,
    and one activation send between the stages."""
    for collective, world in ((Collective.NCCL, PP_TP), (Collective.SEND, 2)):
        probe = curves.price(regime, collective, world, KIMI_K2_HIDDEN * 2.0)
        if isinstance(probe, str):
            return probe

    def per_pass(tokens: float, streams: float) -> Span:
        message = tokens / micro_batches(PP_STAGES, streams) * KIMI_K2_HIDDEN * 2
        ar = curves.price(regime, Collective.NCCL, PP_TP, message)
        send = curves.price(regime, Collective.SEND, 2, message)
        assert isinstance(ar, Price) and isinstance(send, Price)
        n = KIMI_K2_ALLREDUCES_PER_PASS
        return Span(n * ar.low_us + send.low_us, n * ar.high_us + send.high_us)

    basis = curves.price(regime, Collective.NCCL, PP_TP, KIMI_K2_HIDDEN * 2.0)
    return per_pass, basis.basis if isinstance(basis, Price) else str(basis)


def layout_box(base: Box, option: Option) -> Box:
    """The case study's box laid out as ``option`` lays it out (its collectives aside): what its floor and compute
    are priced on, where it runs and where it cannot."""
    if option is Option.EP8_TP_ATTENTION:
        return replace(base, layout=Layout.EP_TP_ATTENTION)
    if option is Option.DP_ATTENTION_EP8:
        return replace(base, layout=Layout.EP_DP_ATTENTION)
    if option is Option.TP4_PP2:
        return replace(base, tp=PP_TP, stages=PP_STAGES)
    return base


def option_box(boxes: OptionBoxes, option: Option, regime: Regime) -> tuple[Box, Overheads, str] | str:
    """The box ``option`` runs on in ``regime``, its overheads and the basis of its communication; why not, where
    it cannot run there."""
    base = boxes.nccl[regime]
    carried = carried_host(base.box, base.calibrated).overheads
    if option is Option.TP8_NCCL:
        return base.box, base.calibrated.overheads, base.box.comm_source
    if option in (Option.TP8_FUSED, Option.TP8_PCIE_IPC):
        case = (boxes.fused if option is Option.TP8_FUSED else boxes.pcie_ipc).get(regime)
        if case is None:
            return "needs working P2P (the kernel writes into the peers' memory)"
        return case.box, case.calibrated.overheads, case.box.comm_source
    if option is Option.EP8_TP_ATTENTION:
        return layout_box(base.box, option), carried, base.box.comm_source
    made = _dp_comm(boxes.curves, regime) if option is Option.DP_ATTENTION_EP8 else _pp_comm(boxes.curves, regime)
    if isinstance(made, str):
        return made
    per_pass, basis = made
    return replace(layout_box(base.box, option), comm_us=per_pass), carried, basis


def option_pass(boxes: OptionBoxes, option: Option, regime: Regime, streams: int, k: int) -> OptionPass:
    """Price one option's verify pass of ``streams`` x ``k`` tokens in ``regime`` with the pricer, each term over
    every scenario and host end; with one stream's tok/s, plain and with EAGLE-3 at the reported accept length. An
    option that cannot run in the regime keeps its floor and compute, and says why not."""
    tokens = streams * k
    base = boxes.nccl[regime]
    found = option_box(boxes, option, regime)
    box, ov, basis = (
        found if not isinstance(found, str) else (layout_box(base.box, option), base.calibrated.overheads, found)
    )
    passes = [price_verify(box, ov, k, streams, s, end) for s, end in product(scenarios(box), ("low", "high"))]
    terms = [(v.physics_ms, v.host_ms, 0.0 if isinstance(found, str) else v.collectives_ms) for v in passes]
    compute, host, comm = (Span.of(*(t[i] for t in terms)) for i in range(3))
    floor = floor_ms(box, tokens, streams, RTX_PRO_6000_BLACKWELL_GBS)
    priced = (floor, compute, None if isinstance(found, str) else comm, host, *_counts(option), basis)
    if isinstance(found, str):
        return OptionPass(option, regime, streams, k, *priced, not_priced=found)
    row = gains(box, ov, Drafter.EAGLE3, boxes.inputs.account.accept_reported, k, [streams])[0]
    plain = Span(row.plain_tokens_per_s.low / streams, row.plain_tokens_per_s.high / streams)
    eagle3 = times(row.gain, plain)  # as the decision shows it: its ratio to plain decoding is the gain
    return OptionPass(option, regime, streams, k, *priced, plain, eagle3)


def _counts(option: Option) -> tuple[int, int]:
    """(collectives, all-reduces) per pass."""
    if option is Option.DP_ATTENTION_EP8:
        return _a2a_count(), 0
    if option is Option.TP4_PP2:
        return KIMI_K2_ALLREDUCES_PER_PASS + 1, KIMI_K2_ALLREDUCES_PER_PASS
    return KIMI_K2_ALLREDUCES_PER_PASS, KIMI_K2_ALLREDUCES_PER_PASS
