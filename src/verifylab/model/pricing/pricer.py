"""The one pricer: what a forward pass costs on a box — plain decoding's step, a verify pass, a speculative cycle, a
prefill — for any model config, GPU, layout, collective, stream count, chain length and routing overlap, as one
:class:`~verifylab.model.pricing.pass_cost.PassCost` record of named terms per scenario. Every tok/s, ms, saving and
gain on a page, an export or a command comes from these records (a test holds the code to it).

A pass of T tokens from C streams costs physics(T, C) + comm(T) + host0 + host1 x C:

- physics: the bytes the busiest GPU reads (:meth:`verifylab.model.inputs.model_costs.ModelCosts.pass_parts`, per
  layout) over its effective bandwidth, plus the arithmetic over its effective matrix rate;
- comm: the pass's collectives, each priced at its own message from a latency curve (a regime's range, a probe,
  a file): the tensor-parallel all-reduces, or what the layout runs instead (:attr:`Box.comm_us`);
- host0 + host1 x C: what the GPU's work does not explain, fitted on a measured plain sweep or calibrated to a
  box's own plain decode rate (:mod:`verifylab.model.pricing.boxes`).

A speculative cycle adds K - 1 draft-model steps and the drafter's overhead per cycle and per stream. A pipeline of
``stages`` walks a pass through each stage in turn, two micro-batches filling it from two streams on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import product

from verifylab.errors import ModelInputError
from verifylab.model.inputs.gpus import Gpu
from verifylab.model.inputs.model_costs import Layout, ModelCosts, PassBytes, Routing
from verifylab.model.pricing.attention import (
    BYTES_ONCE_PER_PASS,
    AttentionTerms,
    kv_pool_tokens,
    stream_context_bytes,
    stream_reads,
)
from verifylab.model.pricing.pass_cost import PassCost
from verifylab.span import Span
from verifylab.vocab import BF16_BYTES, Drafter

NO_OVERLAP = Span(0.0, 0.0)  # a verify chain whose tokens each draw their own experts


AllreduceCurve = Callable[[float], Span]  # message bytes -> one all-reduce's µs (a range)


PassComm = Callable[[float, float], Span]  # (tokens, streams) -> a whole pass's collectives in µs (a range)


def constant_curve(us: float) -> AllreduceCurve:
    """One all-reduce at ``us`` whatever its message: a latency floor."""
    price = Span(us, us)
    return lambda _message: price


@dataclass(frozen=True)
class Box:
    """What runs where: the target (and draft) model on ``tp`` GPUs of one kind, with its all-reduce curve."""

    target: ModelCosts
    gpu: Gpu
    tp: int = 1
    draft: ModelCosts | None = None
    context: float = 2048.0  # tokens of KV each stream attends over
    routing: Routing = Routing.UNIFORM
    allreduce_us: AllreduceCurve | None = None  # None: TP 1, or communication not priced
    comm_source: str = "TP 1: no all-reduce"
    decode_allreduce_us: AllreduceCurve | None = None  # plain decoding's, where it runs otherwise (None: the same)
    draft_allreduce_us: AllreduceCurve | None = None  # the draft model's, where it runs otherwise (None: the same)
    chain_overlap: Span = NO_OVERLAP  # how much a verify chain's tokens share experts (uniform routing; 0..1)
    layout: Layout = Layout.TP  # experts sharded (TP) or whole (EP); attention sharded or per request (DP)
    stages: int = 1  # pipeline stages, each on ``tp`` GPUs
    comm_us: PassComm | None = None  # the target's collectives per pass where they are not TP all-reduces
    attention: AttentionTerms = BYTES_ONCE_PER_PASS  # the target's attention over context (pricing.attention)
    mem_fraction: float | None = None  # of each GPU's memory for weights and KV: the pool that caps running streams

    def __post_init__(self) -> None:
        if self.tp > 1 and self.allreduce_us is None:
            raise ModelInputError(f"TP {self.tp} needs an all-reduce curve (--regime or --latency)")
        if not 0.0 <= self.chain_overlap.low <= self.chain_overlap.high <= 1.0:
            raise ModelInputError(f"routing overlap {self.chain_overlap.text(2)} must lie in 0..1")

    def pools(self) -> tuple[int, int] | None:
        """Tokens of context the KV pool holds without and with the draft model (None: capacity not priced)."""
        if self.mem_fraction is None:
            return None
        plain = kv_pool_tokens(self.target, None, self.gpu, self.tp, self.mem_fraction, stages=self.stages)
        return plain, kv_pool_tokens(self.target, self.draft, self.gpu, self.tp, self.mem_fraction, stages=self.stages)

    def allreduces_per_pass(self, model: ModelCosts) -> int:
        """Two per layer (after attention, after the MLP/MoE) at TP > 1."""
        return 2 * model.layers if self.tp > 1 else 0


@dataclass(frozen=True)
class Scenario:
    """One end of every range at once: the bandwidth, matrix rate and all-reduce latency ends taken together."""

    bandwidth_gbs: float
    tflops: float
    comm_end: str  # "low" / "high"
    overlap: float = 0.0  # the routing overlap of a verify chain


def scenarios(box: Box) -> list[Scenario]:
    bws = sorted({box.gpu.bandwidth_gbs.low, box.gpu.bandwidth_gbs.high})
    tfs = sorted({box.gpu.tflops.low, box.gpu.tflops.high})
    overlaps = sorted({box.chain_overlap.low, box.chain_overlap.high})
    return [Scenario(b, t, c, o) for b, t, c, o in product(bws, tfs, ("low", "high"), overlaps)]


def micro_batches(stages: int, streams: float) -> int:
    """How many micro-batches a pass is cut into: two once a pipeline has two streams to fill its stages with."""
    return 2 if stages > 1 and streams >= 2 else 1


def busiest_bytes(box: Box, model: ModelCosts, tokens: float, streams: float, overlap: float = 0.0) -> float:
    """The bytes the busiest GPU of the box reads in a pass of ``tokens`` tokens from ``streams`` streams: through
    a pipeline, every stage in turn for each micro-batch (the other micro-batch fills the stage it leaves)."""
    return _busiest(box, model, tokens, streams, overlap)[0]


def _busiest(
    box: Box, model: ModelCosts, tokens: float, streams: float, overlap: float
) -> tuple[float, PassBytes, int]:
    """:func:`busiest_bytes`, and the bytes of one stage by part with the number of stages that read them."""
    if model is not box.target or (box.layout is Layout.TP and box.stages == 1):
        parts = model.pass_parts(tokens, streams, box.context, box.tp, box.routing, overlap)
        return parts.total, parts, 1
    micro = micro_batches(box.stages, streams)
    kv_streams = math.ceil(streams / (box.tp * box.stages)) if box.layout is Layout.EP_DP_ATTENTION else streams / micro
    layers = math.ceil(model.layers / box.stages) if box.stages > 1 else None
    part = model.pass_parts(
        tokens / micro, streams / micro, box.context, box.tp, box.routing, overlap, box.layout, layers, kv_streams
    )
    return box.stages * part.total, part, box.stages


def price_pass(
    box: Box, model: ModelCosts, tokens: float, streams: float, s: Scenario, decode: bool = False
) -> PassCost:
    """The GPU's work and the collectives of one pass of ``model`` (the box's target or its draft) in scenario ``s``:
    bytes over bandwidth by part, arithmetic over the matrix rate, the pass's collectives (``decode``: plain
    decoding's curve); no host overhead (:func:`price_step`, :func:`price_verify` and the others add it)."""
    read, parts, stages = _busiest(box, model, tokens, streams, s.overlap)
    if model is box.target and box.stages > 1:  # a micro-batch's arithmetic, each stage's share in turn on tp GPUs
        flops = model.pass_flops(tokens / micro_batches(box.stages, streams), box.context, box.tp)
    else:
        flops = model.pass_flops(tokens, box.context, box.tp)
    per_byte_ms = 1e3 / (s.bandwidth_gbs * 1e9)
    weights = parts.attention + parts.shared_and_dense + parts.head
    memory_ms, kv_ms = read / (s.bandwidth_gbs * 1e9) * 1e3, stages * parts.kv * per_byte_ms
    if model is box.target and box.attention is not BYTES_ONCE_PER_PASS and stages == 1 and box.layout is Layout.TP:
        read_once = stream_context_bytes(model, box.context, box.tp)
        priced = read_once * stream_reads(box.attention, tokens, streams) * per_byte_ms
        memory_ms, kv_ms = memory_ms - kv_ms + priced, priced
    return PassCost(
        tokens,
        streams,
        memory_ms=memory_ms,
        arithmetic_ms=flops / (s.tflops * 1e12) * 1e3,
        collectives_ms=_comm_ms(box, model, tokens, s, decode, streams),
        weights_ms=stages * weights * per_byte_ms,
        experts_ms=stages * parts.experts * per_byte_ms,
        kv_ms=kv_ms,
        collective=box.comm_source if model is box.target else "the draft model's all-reduces",
    )


def stream_read_ms(model: ModelCosts, context: float, tp: int, bandwidth_gbs: float) -> float:
    """Reading one stream's ``context`` tokens of KV once on one GPU of ``tp`` at ``bandwidth_gbs`` (ms)."""
    return stream_context_bytes(model, context, tp) / (bandwidth_gbs * 1e9) * 1e3


def floor_ms(box: Box, tokens: float, streams: float, bandwidth_gbs: float) -> float:
    """The target's pass at ``bandwidth_gbs`` (a datasheet's peak): no pass of these bytes can be faster (ms)."""
    return busiest_bytes(box, box.target, tokens, streams) / (bandwidth_gbs * 1e9) * 1e3


def _comm_ms(box: Box, model: ModelCosts, tokens: float, s: Scenario, decode: bool, streams: float | None) -> float:
    """The pass's collectives (ms): the layout's own where the box has them (:attr:`Box.comm_us`, at ``streams``),
    else its all-reduces at their message size; ``decode``: plain decoding's curve where the box has one; the draft
    model's passes on its own curve where the box has one."""
    if model is box.target and box.comm_us is not None:
        per_pass = box.comm_us(tokens, tokens if streams is None else streams)
        return (per_pass.low if s.comm_end == "low" else per_pass.high) / 1e3
    curve = box.decode_allreduce_us if decode and box.decode_allreduce_us is not None else box.allreduce_us
    if model is box.draft and box.draft_allreduce_us is not None:
        curve = box.draft_allreduce_us
    if curve is None:
        return 0.0
    per = curve(tokens * model.hidden * BF16_BYTES)
    return box.allreduces_per_pass(model) * (per.low if s.comm_end == "low" else per.high) / 1e3


@dataclass(frozen=True)
class Overheads:
    """What the GPU's work does not explain: per forward pass, and per speculative cycle by drafter."""

    host0_ms: Span
    host1_ms: float  # per stream and pass
    cycle: dict[Drafter, tuple[float, float]] = field(default_factory=dict)  # (per cycle ms, per stream ms)
    source: str = ""
    host_miss: float = 0.0  # the host fit's largest relative miss on the sweep it was fitted on
    cycle_miss: dict[Drafter, float] = field(default_factory=dict)  # each drafter's fit, likewise
    decode_ms: float | None = None  # a box's measured plain step at one stream: host0 is what each scenario leaves

    def margin(self, drafter: Drafter) -> float:
        """How much wider than its point value a range of this drafter is drawn: its fits' largest miss."""
        return max(self.host_miss, self.cycle_miss.get(drafter, 0.0))


def _host0_ms(box: Box, ov: Overheads, s: Scenario, host_end: str) -> float:
    """The per-pass host overhead in scenario ``s``: calibrated, what the box's measured one-stream step leaves once
    this scenario's physics and all-reduces are paid (never below 0); fitted, an end of the fitted range."""
    if ov.decode_ms is not None:
        one = price_pass(box, box.target, 1, 1, s, decode=True)
        paid = one.physics_ms + one.collectives_ms + ov.host1_ms
        return max(ov.decode_ms - paid, 0.0)
    return ov.host0_ms.low if host_end == "low" else ov.host0_ms.high


def price_step(box: Box, ov: Overheads, streams: float, s: Scenario, host_end: str = "low") -> PassCost:
    """Plain decoding: one forward pass of one token per stream."""
    work = price_pass(box, box.target, streams, streams, s, decode=True)
    return replace(work, host_pass_ms=_host0_ms(box, ov, s, host_end), host_streams_ms=ov.host1_ms * streams)


def price_verify(
    box: Box, ov: Overheads, draft_tokens: int, streams: float, s: Scenario, host_end: str = "low"
) -> PassCost:
    """One verify pass of ``streams`` x ``draft_tokens`` tokens: bytes, arithmetic, all-reduces, host overhead."""
    work = price_pass(box, box.target, streams * draft_tokens, streams, s)
    return replace(work, host_pass_ms=_host0_ms(box, ov, s, host_end), host_streams_ms=ov.host1_ms * streams)


def price_prefill(box: Box, ov: Overheads, prompt_tokens: int, s: Scenario, host_end: str = "low") -> PassCost:
    """One prompt's prefill pass on its own: its bytes and arithmetic, its all-reduces and the per-pass overhead."""
    return replace(price_pass(box, box.target, prompt_tokens, 1, s), host_pass_ms=_host0_ms(box, ov, s, host_end))


def price_moved_step(measured_ms: float, kv_ms: float, streams: float) -> PassCost:
    """A plain step measured on a public box and moved to another context: what it took there plus the KV reads the
    context adds (or saves: negative)."""
    return PassCost(tokens=streams, streams=streams, measured_ms=measured_ms, memory_ms=kv_ms, kv_ms=kv_ms)


def price_moved_cycle(measured_ms: float, kv_ms: float, verify_ms: float, streams: float) -> PassCost:
    """A speculative cycle measured on a public box and moved to another context: what it took there plus the KV
    reads the context adds to its draft and verify, and (another engine's kernel) that engine's verify growth."""
    return PassCost(tokens=streams, streams=streams, measured_ms=measured_ms + verify_ms, memory_ms=kv_ms, kv_ms=kv_ms)


def price_cycle(
    box: Box, ov: Overheads, drafter: Drafter, draft_tokens: int, streams: float, s: Scenario, host_end: str = "low"
) -> PassCost:
    """One speculative cycle: the verify pass of C x K tokens, K - 1 draft steps, the drafter's overhead."""
    if drafter not in ov.cycle:
        raise ModelInputError(f"no measured {drafter.value} overhead: fit it on a speculative sweep first")
    verify = price_verify(box, ov, draft_tokens, streams, s, host_end)
    draft = 0.0
    if drafter is Drafter.EAGLE3:
        if box.draft is None:
            raise ModelInputError("an EAGLE-3 prediction needs the draft model's config (--draft-config)")
        step = price_pass(box, box.draft, streams, streams, s)
        draft = (draft_tokens - 1) * (step.physics_ms + step.collectives_ms)
    c0, c1 = ov.cycle[drafter]
    return replace(verify, draft_steps_ms=draft, drafter_cycle_ms=c0, drafter_streams_ms=c1 * streams)
