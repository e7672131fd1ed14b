"""Speculative decoding under load, modelled for any model config and GPU: plain decoding's step and a speculative
cycle at C streams, the gain (accept length x step / cycle) and the stream count where it falls below 1.

A forward pass of T tokens from C streams costs

    physics(T, C) + comm(T) + host0 + host1 x C

- physics: the bytes one GPU must read (:mod:`verifylab.model.model_config`) over its effective bandwidth, plus the
  arithmetic over its effective matrix rate (both from measured ceilings where a run measured them);
- comm: the tensor-parallel all-reduces of the pass, each priced at its message (T x hidden bf16) from a latency
  curve (a regime's range, a probe, a file); none at TP 1;
- host0 + host1 x C: what the GPU's work does not explain (launches, the scheduler's per-request work), fitted on a
  measured plain-decoding sweep, or host0 calibrated from a box's own plain decode rate.

A speculative cycle with a chain of K draft tokens is one forward pass of C x K tokens, K - 1 draft-model steps
(physics and the draft's own all-reduces; none for an n-gram drafter) and the drafter's overhead per cycle,
cycle0 + cycle1 x C, fitted on one accept length of a measured speculative sweep. The cost side does not depend on
the accept length A (every verify processes every draft token), so the model predicts every other accept length,
and other chain lengths, out of sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise, product

import numpy as np

from verifylab.errors import ModelInputError
from verifylab.model.cycle import Span
from verifylab.model.model_config import ModelCosts, Routing
from verifylab.vocab import BF16_BYTES, Drafter


@dataclass(frozen=True)
class Gpu:
    """A GPU as the model sees it: effective bandwidth and matrix rate (ranges where not measured)."""

    name: str
    bandwidth_gbs: Span
    tflops: Span
    memory_bytes: float
    source: str


# Datasheet figures (public): bandwidth GB/s, dense bf16 TFLOP/s (None: not in this project's sources), memory.
DATASHEETS: dict[str, tuple[float, float | None, float, str]] = {
    "h200": (4800.0, 989.0, 141e9, "NVIDIA H200 SXM datasheet: 4.8 TB/s, 989 dense bf16 TFLOP/s, 141 GB"),
    "h100": (3350.0, 989.0, 80e9, "NVIDIA H100 SXM datasheet: 3.35 TB/s, 989 dense bf16 TFLOP/s, 80 GB"),
    "rtx-pro-6000": (1792.0, None, 96e9, "NVIDIA RTX PRO 6000 Blackwell datasheet: 1792 GB/s, 96 GB"),
}
# Matrix rates measured on the card itself and published (reported, public): used as they are, never scaled.
PUBLIC_TFLOPS: dict[str, tuple[Span, str]] = {
    "rtx-pro-6000": (
        Span(368.43, 417.34),
        "reported (public): a bf16 8192^3 torch matmul, '8192x8192: 368.43 TFLOPS' on a Workstation Edition "
        "(https://github.com/zzc0721/torch-performance-test-data/issues/160, 2026-04-04) and '8192x8192: 417.34 "
        "TFLOPS' on a Server Edition (same repository, issue 162, 2026-04-09)",
    )
}
UNKNOWN_TFLOPS = Span(250.0, 500.0)  # assumed where no rate is known


@dataclass(frozen=True)
class Ceilings:
    """What one GPU reached on a large copy and a large bf16 matrix product (a measured run)."""

    gpu: str
    copy_gbs: float
    matmul_tflops: Span
    source: str


def gpu_named(
    name: str, ceilings: Ceilings | None = None, bandwidth_gbs: float | None = None, tflops: float | None = None
) -> Gpu:
    """A GPU by name (``h200``, ``h100``, ``rtx-pro-6000``): measured ceilings where ``ceilings`` is of this GPU, else
    its datasheet scaled by the fraction of the datasheet that the measured GPU reached; a value given wins."""
    key = name.lower().replace("_", "-").replace(" ", "-")
    if key not in DATASHEETS:
        raise ModelInputError(f"--gpu {name!r}: known GPUs are {', '.join(DATASHEETS)} (or give --bandwidth-gbs)")
    sheet_bw, sheet_tf, memory, sheet = DATASHEETS[key]
    sources = [sheet]
    if ceilings is not None and ceilings.gpu == key:
        bw, tf = Span(ceilings.copy_gbs, ceilings.copy_gbs), ceilings.matmul_tflops
        sources.append(f"measured ceilings: {ceilings.source}")
    elif ceilings is not None:
        ref_bw, ref_tf, _, _ = DATASHEETS[ceilings.gpu]
        bw_frac = ceilings.copy_gbs / ref_bw
        bw = Span(sheet_bw * bw_frac, sheet_bw * bw_frac)
        if sheet_tf is not None and ref_tf is not None:
            tf = Span(sheet_tf * ceilings.matmul_tflops.low / ref_tf, sheet_tf * ceilings.matmul_tflops.high / ref_tf)
        else:
            tf = UNKNOWN_TFLOPS
        sources.append(f"datasheet x the {ceilings.gpu.upper()}'s measured fraction ({ceilings.source})")
    else:
        bw = Span(sheet_bw, sheet_bw)
        tf = Span(sheet_tf, sheet_tf) if sheet_tf is not None else UNKNOWN_TFLOPS
        sources.append("datasheet peaks (never reached: an optimistic bound)")
    if key in PUBLIC_TFLOPS and not (ceilings is not None and ceilings.gpu == key):
        tf, public = PUBLIC_TFLOPS[key]
        sources.append(f"matrix rate {public}")
    elif tf == UNKNOWN_TFLOPS:
        sources.append(f"dense bf16 rate assumed {tf.text(0)} TFLOP/s (not in this project's sources)")
    if bandwidth_gbs is not None:
        bw, sources = Span(bandwidth_gbs, bandwidth_gbs), [*sources, f"bandwidth given: {bandwidth_gbs:g} GB/s"]
    if tflops is not None:
        tf, sources = Span(tflops, tflops), [*sources, f"matrix rate given: {tflops:g} TFLOP/s"]
    for what, value in (("bandwidth", bw.low), ("matrix rate", tf.low)):
        if not (math.isfinite(value) and value > 0):
            raise ModelInputError(f"--gpu {name}: {what} {value!r} must be a finite number > 0")
    return Gpu(key, bw, tf, memory, "; ".join(sources))


NO_OVERLAP = Span(0.0, 0.0)  # a verify chain whose tokens each draw their own experts
AllreduceCurve = Callable[[float], Span]  # message bytes -> one all-reduce's µs (a range)


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

    def __post_init__(self) -> None:
        if self.tp > 1 and self.allreduce_us is None:
            raise ModelInputError(f"TP {self.tp} needs an all-reduce curve (--regime or --latency)")
        if not 0.0 <= self.chain_overlap.low <= self.chain_overlap.high <= 1.0:
            raise ModelInputError(f"routing overlap {self.chain_overlap.text(2)} must lie in 0..1")

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


def physics_ms(box: Box, model: ModelCosts, tokens: float, streams: float, s: Scenario) -> float:
    """Bytes over bandwidth plus arithmetic over the matrix rate, one GPU of the box (ms)."""
    read = model.pass_bytes(tokens, streams, box.context, box.tp, box.routing, s.overlap)
    flops = model.pass_flops(tokens, box.context, box.tp)
    return read / (s.bandwidth_gbs * 1e9) * 1e3 + flops / (s.tflops * 1e12) * 1e3


def comm_ms(box: Box, model: ModelCosts, tokens: float, s: Scenario, decode: bool = False) -> float:
    """The pass's all-reduces at its message size (ms); ``decode``: plain decoding's curve where the box has one;
    the draft model's passes on its own curve where the box has one."""
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


def host0_ms(box: Box, ov: Overheads, s: Scenario, host_end: str = "low") -> float:
    """The per-pass host overhead in scenario ``s``: calibrated, what the box's measured one-stream step leaves once
    this scenario's physics and all-reduces are paid (never below 0); fitted, an end of the fitted range."""
    if ov.decode_ms is not None:
        paid = physics_ms(box, box.target, 1, 1, s) + comm_ms(box, box.target, 1, s, decode=True) + ov.host1_ms
        return max(ov.decode_ms - paid, 0.0)
    return ov.host0_ms.low if host_end == "low" else ov.host0_ms.high


def step_ms(box: Box, ov: Overheads, streams: float, s: Scenario, host_end: str = "low") -> float:
    """Plain decoding: one forward pass of one token per stream."""
    host0 = host0_ms(box, ov, s, host_end)
    comm = comm_ms(box, box.target, streams, s, decode=True)
    return physics_ms(box, box.target, streams, streams, s) + comm + host0 + ov.host1_ms * streams


def verify_ms(box: Box, ov: Overheads, draft_tokens: int, streams: float, s: Scenario, host_end: str = "low") -> float:
    """One verify pass of ``streams`` x ``draft_tokens`` tokens: bytes, arithmetic, all-reduces, host overhead."""
    tokens = streams * draft_tokens
    verify = physics_ms(box, box.target, tokens, streams, s) + comm_ms(box, box.target, tokens, s)
    return verify + host0_ms(box, ov, s, host_end) + ov.host1_ms * streams


def cycle_ms(
    box: Box, ov: Overheads, drafter: Drafter, draft_tokens: int, streams: float, s: Scenario, host_end: str = "low"
) -> float:
    """One speculative cycle: the verify pass of C x K tokens, K - 1 draft steps, the drafter's overhead."""
    if drafter not in ov.cycle:
        raise ModelInputError(f"no measured {drafter.value} overhead: fit it on a speculative sweep first")
    verify = verify_ms(box, ov, draft_tokens, streams, s, host_end)
    draft = 0.0
    if drafter is Drafter.EAGLE3:
        if box.draft is None:
            raise ModelInputError("an EAGLE-3 prediction needs the draft model's config (--draft-config)")
        per_step = physics_ms(box, box.draft, streams, streams, s) + comm_ms(box, box.draft, streams, s)
        draft = (draft_tokens - 1) * per_step
    c0, c1 = ov.cycle[drafter]
    return verify + draft + c0 + c1 * streams


@dataclass(frozen=True)
class GainRow:
    streams: int
    plain_tokens_per_s: Span  # all streams
    spec_tokens_per_s: Span
    gain: Span

    def as_row(self) -> dict[str, float]:
        """The row's ranges as flat columns (``*_low``, ``*_high``), as tables and JSON carry them."""
        return {
            "streams": self.streams,
            "plain_tokens_per_s_low": self.plain_tokens_per_s.low,
            "plain_tokens_per_s_high": self.plain_tokens_per_s.high,
            "spec_tokens_per_s_low": self.spec_tokens_per_s.low,
            "spec_tokens_per_s_high": self.spec_tokens_per_s.high,
            "gain_low": self.gain.low,
            "gain_high": self.gain.high,
        }


def gains(
    box: Box, ov: Overheads, drafter: Drafter, accept: float, draft_tokens: int, streams: Sequence[int]
) -> list[GainRow]:
    """Plain and speculative tok/s and the gain at each stream count, each a range over every end of every input
    range taken together (a scenario prices both sides the same way)."""
    if not 1.0 <= accept <= draft_tokens:
        raise ModelInputError(f"accept length {accept:g} must lie in 1..{draft_tokens} (the chain's draft tokens)")
    rows = []
    for c in streams:
        plain, spec, gain = [], [], []
        ends = ("low",) if ov.decode_ms is not None or ov.host0_ms.low == ov.host0_ms.high else ("low", "high")
        for s, host in product(scenarios(box), ends):
            t_step, t_cycle = step_ms(box, ov, c, s, host), cycle_ms(box, ov, drafter, draft_tokens, c, s, host)
            plain.append(c * 1e3 / t_step)
            spec.append(c * accept * 1e3 / t_cycle)
            gain.append(accept * t_step / t_cycle)
        m, h = ov.margin(drafter), ov.host_miss
        rows.append(
            GainRow(
                c,
                Span(min(plain) * (1 - h), max(plain) * (1 + h)),
                Span(min(spec) * (1 - m), max(spec) * (1 + m)),
                Span(min(gain) * (1 - m), max(gain) * (1 + m)),
            )
        )
    return rows


def crossover_streams(points: Sequence[tuple[float, float]]) -> float | None:
    """Where a gain curve ``[(streams, gain), ...]`` first falls below 1, interpolated in log2(streams); the first
    stream count when it never reaches 1; None when it never falls below 1."""
    pts = sorted(points)
    if not pts:
        return None
    if pts[0][1] < 1.0:
        return pts[0][0]
    for (c0, g0), (c1, g1) in pairwise(pts):
        if g1 < 1.0 <= g0:
            x0, x1 = math.log2(c0), math.log2(c1)
            return 2 ** (x0 + (g0 - 1.0) / (g0 - g1) * (x1 - x0))
    return None


def crossings(points: Sequence[tuple[float, float]]) -> list[tuple[float, str]]:
    """Every stream count where a gain curve ``[(streams, gain), ...]`` crosses 1, interpolated in log2(streams),
    with its direction: ``"stops"`` (falls below 1) or ``"pays"`` (rises to 1 or above again). A curve that starts
    below 1 gives ``(first streams, "stops")`` first."""
    pts = sorted(points)
    out: list[tuple[float, str]] = []
    if pts and pts[0][1] < 1.0:
        out.append((pts[0][0], "stops"))
    for (c0, g0), (c1, g1) in pairwise(pts):
        if (g0 >= 1.0) == (g1 >= 1.0):
            continue
        x0, x1 = math.log2(c0), math.log2(c1)
        at = 2 ** (x0 + (g0 - 1.0) / (g0 - g1) * (x1 - x0))
        out.append((at, "stops" if g1 < 1.0 else "pays"))
    return out


def paying_streams(rows: Sequence[GainRow], end: str = "low") -> list[int]:
    """The stream counts of ``rows`` where the gain's ``end`` ("low": pessimistic, "high") is at least 1."""
    return [r.streams for r in rows if (r.gain.low if end == "low" else r.gain.high) >= 1.0]


def crossover_range(rows: Sequence[GainRow]) -> tuple[float | None, float | None]:
    """The crossover of the pessimistic (low) and optimistic (high) gain curves: (low, high); None: beyond the
    largest stream count given."""
    low = crossover_streams([(r.streams, r.gain.low) for r in rows])
    high = crossover_streams([(r.streams, r.gain.high) for r in rows])
    return low, high


# ------------------------------------------------------------------------------------------------- fitting
@dataclass(frozen=True)
class FitResult:
    """A linear fit of what physics leaves unexplained, ``a + b x streams``, and how well it holds."""

    intercept_ms: float
    per_stream_ms: float
    residual_ms: tuple[float, ...]  # measured - physics at each point (what was fitted)
    below_physics: tuple[int, ...]  # stream counts where the measurement is faster than physics allows
    relative_miss: float  # the fit's largest |fitted - measured| / measured over its points


def fit_linear(
    streams: Sequence[float], unexplained_ms: Sequence[float], measured_ms: Sequence[float]
) -> tuple[float, float]:
    """Least squares ``a + b x`` of what physics leaves unexplained, each point weighted by 1 / its measured total
    (relative errors: a gain is a ratio, so 1 stream counts as much as 128), with b >= 0 (more streams never make
    a pass cheaper)."""
    x, y = np.asarray(streams, dtype=float), np.asarray(unexplained_ms, dtype=float)
    w = 1.0 / np.asarray(measured_ms, dtype=float)
    if len(x) < 2:
        return float(y.mean()), 0.0
    b, a = np.polyfit(x, y, 1, w=w)
    if b < 0:
        return float(np.average(y, weights=w**2)), 0.0
    return float(a), float(b)


def fit_host(box: Box, plain: Sequence[tuple[int, float]]) -> FitResult:
    """host0 + host1 x C from a measured plain sweep ``[(streams, step ms), ...]`` (physics and comm at their
    point values; a measurement faster than physics is listed: the box reads fewer bytes than it is said to)."""
    s = scenarios(box)[0]
    resid = [ms - physics_ms(box, box.target, c, c, s) - comm_ms(box, box.target, c, s, True) for c, ms in plain]
    a, b = fit_linear([c for c, _ in plain], resid, [ms for _, ms in plain])
    below = tuple(c for (c, _), r in zip(plain, resid, strict=True) if r < 0)
    return FitResult(a, b, tuple(resid), below, _miss(plain, resid, a, b, 1.0))


def fit_cycle(
    box: Box, host: Overheads, drafter: Drafter, draft_tokens: int, accept: float, spec: Sequence[tuple[int, float]]
) -> FitResult:
    """cycle0 + cycle1 x C from a measured speculative sweep ``[(streams, ms per token), ...]`` at one accept
    length (a cycle is accept x ms per token)."""
    s = scenarios(box)[0]
    probe = replace(host, cycle={**host.cycle, drafter: (0.0, 0.0)})
    resid = [accept * ms - cycle_ms(box, probe, drafter, draft_tokens, c, s) for c, ms in spec]
    a, b = fit_linear([c for c, _ in spec], resid, [accept * ms for _, ms in spec])
    below = tuple(c for (c, _), r in zip(spec, resid, strict=True) if r < 0)
    return FitResult(a, b, tuple(resid), below, _miss(spec, resid, a, b, accept))


def _miss(points: Sequence[tuple[int, float]], resid: Sequence[float], a: float, b: float, scale: float) -> float:
    """The largest relative miss of ``a + b x`` on what it was fitted to (measured = ``scale`` x each point)."""
    return max(abs(a + b * c - r) / (scale * ms) for (c, ms), r in zip(points, resid, strict=True))
