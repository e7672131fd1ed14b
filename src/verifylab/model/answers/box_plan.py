"""The configuration to deploy on one box, chosen by goodput under the owner's SLO: every configuration SGLang can
run there (plain decoding, or EAGLE-3 with 2-8 draft tokens, each with a cap on running requests) priced by the
speculation model at the owner's load, the best and the runner-up, and the plan that measures them (servers, stream
counts, minutes). Modelled; ``bench.box_verify`` measures the plan and ``analysis.box_verify`` compares.

Closed-loop load of ``load`` streams against a cap of M running requests: min(load, M) run, each at the model's
per-stream rate; the rest wait, so a request's first token comes after its prefill plus (load - M) / M request
durations. A configuration meets the SLO when its time per output token and its time to first token are within the
limits; its goodput is then its throughput, else 0. Both ends of every range are kept: the choice is made on the
pessimistic end (ties: the optimistic end, then the simpler configuration)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from verifylab.errors import ModelInputError
from verifylab.model.pricing.pricer import Box, Overheads, price_prefill, scenarios
from verifylab.model.pricing.speculation import gains
from verifylab.span import Span
from verifylab.stats import DEFAULT_SLO
from verifylab.vocab import Drafter

DRAFT_TOKENS = (2, 3, 4, 5, 6, 8)  # the chains priced (root included)


STARTUP_S = 150.0  # a server's start, as measured for a 30B MoE on one H200 (60-150 s; the first compiles kernels)
STARTUP_WEIGHTS_BYTES = 61e9  # that server's weights on its one GPU (Qwen3-30B-A3B in bf16)


def startup_seconds(weights_per_gpu_bytes: float) -> float:
    """A server's start-up scaled by the weights each GPU loads (never below the measured one): loading dominates a
    large model's start, kernel builds a small one's."""
    return STARTUP_S * max(1.0, weights_per_gpu_bytes / STARTUP_WEIGHTS_BYTES)


MAX_STREAMS = 1024


@dataclass(frozen=True)
class Slo:
    """The owner's latency limits: time to first token and time per output token (ms)."""

    ttft_ms: float = DEFAULT_SLO["ttft_s"] * 1e3
    tpot_ms: float = DEFAULT_SLO["tpot_s"] * 1e3

    def __post_init__(self) -> None:
        for name, value in (("--slo-ttft-ms", self.ttft_ms), ("--slo-tpot-ms", self.tpot_ms)):
            if not (math.isfinite(value) and 0 < value <= 3.6e6):
                raise ModelInputError(f"{name} {value!r}: a limit in milliseconds, > 0 and at most an hour")


@dataclass(frozen=True)
class Configuration:
    """A way to serve: plain decoding (``drafter`` None) or a drafter at ``draft_tokens`` per verify accepting
    ``accept`` tokens on average, with at most ``max_running`` requests running."""

    drafter: Drafter | None
    draft_tokens: int
    accept: float
    max_running: int

    def words(self) -> str:
        """``EAGLE-3, 4 draft tokens (accept 2.60), at most 32 running`` / ``plain decoding, at most 32 running``."""
        cap = f"at most {self.max_running} running"
        if self.drafter is None:
            return f"plain decoding, {cap}"
        return f"{self.drafter.prose_name}, {self.draft_tokens} draft tokens (accept {self.accept:.2f}), {cap}"


@dataclass(frozen=True)
class CellPrediction:
    """One configuration at one offered load: throughput, time per output token and to first token, goodput."""

    streams: int
    tokens_per_s: Span
    tpot_ms: Span
    ttft_ms: Span
    goodput: Span  # tok/s within the SLO (0 where a limit is missed)


@dataclass(frozen=True)
class Priced:
    """A configuration priced at the owner's load and at the plan's stream counts."""

    config: Configuration
    at_load: CellPrediction
    cells: tuple[CellPrediction, ...]


OTHER_COLLECTIVE = "other all-reduce"  # the role of the best configuration on the all-reduce not launched
COLLECTIVE_WORDS = {"nccl": "NCCL", "pcie_ipc": "PCIe-IPC", "fused": "fusion"}  # a plan's all-reduces, short
COLLECTIVE_NAMES = {  # and named in full (the all-reduce line, a check's configurations and refusals)
    "nccl": "NCCL",
    "pcie_ipc": "SGLang's PCIe-IPC all-reduce",
    "fused": "FlashInfer's fused all-reduce + RMSNorm",
}


@dataclass(frozen=True)
class MeasuredServer:
    """One server ``--verify`` starts: its role in the plan, its configuration as priced, and its all-reduce."""

    role: str  # "chosen", "runner-up", "plain" or OTHER_COLLECTIVE
    priced: Priced
    collective: str = "nccl"  # its all-reduce: "nccl", "pcie_ipc" (SGLang's PCIe-IPC) or "fused" (FlashInfer's)

    @property
    def pcie_ipc(self) -> bool:
        """Whether it sets SGLang's PCIe-IPC switch."""
        return self.collective == "pcie_ipc"

    @property
    def fused(self) -> bool:
        """Whether it runs FlashInfer's fused all-reduce + RMSNorm."""
        return self.collective == "fused"


@dataclass(frozen=True)
class BoxPlan:
    """The choice, the runner-up and plain decoding, and what measuring them costs."""

    load: int
    slo: Slo
    chosen: Priced
    runner_up: Priced
    plain: Priced
    streams: tuple[int, ...]
    minutes: float
    budget_minutes: float
    inputs: dict[str, str] = field(default_factory=dict)
    tp: int = 1  # the tensor-parallel size the plan was priced at (its command carries it)
    collective: str = "nccl"  # the all-reduce it priced, its command and its check run: "pcie_ipc" or "nccl"
    attention_backend: str | None = None  # the attention backend its command names (the answer's)
    launch_refusal: str | None = None  # why no SGLang command serves the answer (vLLM's prices, a patched kernel)
    trust_remote_code: bool = False  # the model's config names remote code (auto_map)
    kv_cache_dtype: str | None = None  # SGLang's --kv-cache-dtype where the answer assumes one other than bf16
    context_tokens: int | None = None  # the owner's stated context: --verify sends prompts of that length
    stream_cap: int | None = None  # distinct streams of that context the KV pool holds (the sweep stays within)
    other_collective: Priced | None = None  # the best configuration on an all-reduce not launched, where it ties
    other_on: str = ""  # that all-reduce, in ``collective``'s words

    @property
    def measured_servers(self) -> list[MeasuredServer]:
        """The servers ``--verify`` starts, in order: the choice, the runner-up, plain decoding (once each), on the
        all-reduce the plan launches; then, where the two all-reduces tie, the other's best configuration on it."""
        roles = {}
        for role, priced in (("plain", self.plain), ("runner-up", self.runner_up), ("chosen", self.chosen)):
            roles[priced.config] = role  # a configuration in two roles keeps the first of chosen, runner-up, plain
        ordered = _unique((self.chosen, self.runner_up, self.plain))
        servers = [MeasuredServer(roles[p.config], p, self.launched) for p in ordered]
        if self.other_collective is not None:
            other = self.other_on or ("pcie_ipc" if self.launched == "nccl" else "nccl")  # two all-reduces: the other
            servers.append(MeasuredServer(OTHER_COLLECTIVE, self.other_collective, other))
        return servers

    @property
    def launched(self) -> str:
        """The all-reduce its servers run: the one it priced, at TP > 1 (TP 1 has none: NCCL's words)."""
        return self.collective if self.tp > 1 else "nccl"


def accept_at(draft_tokens: int, accept: float, stated_for: int) -> float:
    """The mean accept length of a chain of ``draft_tokens`` when ``accept`` was measured with ``stated_for``: each
    draft token accepted with one probability a, A(k) = (1 - a^k) / (1 - a) (a chain's root always counts)."""
    if not 1.0 <= accept <= stated_for:
        raise ModelInputError(f"--accept {accept!r}: from 1 to --draft-tokens ({stated_for})")
    if accept >= stated_for:
        return float(draft_tokens)
    if accept == 1.0:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):  # A(k) rises with a: bisect for the a that gives ``accept`` at ``stated_for``
        mid = (low + high) / 2
        if sum(mid**i for i in range(stated_for)) < accept:
            low = mid
        else:
            high = mid
    a = (low + high) / 2
    return float(sum(a**i for i in range(draft_tokens)))


def candidates(load: int, accept: float, stated_for: int, chains: Sequence[int] = DRAFT_TOKENS) -> list[Configuration]:
    """Plain decoding and EAGLE-3 at every chain of ``chains``, each capped at the load and at every power of two
    below it."""
    caps = sorted({load, *(2**i for i in range(int(math.log2(load)) + 1) if 2**i < load)})
    out = [Configuration(None, 1, 1.0, m) for m in caps]
    for k in chains:
        a = accept_at(k, accept, stated_for)
        out += [Configuration(Drafter.EAGLE3, k, a, m) for m in caps]
    return out


RateSource = Callable[[Configuration, Sequence[int]], dict[int, Span]]  # all streams' tok/s per running count


def model_rates(box: Box, ov: Overheads) -> RateSource:
    """Rates from the speculation model on ``box`` (plain decoding's from any EAGLE-3 row: the step is the same)."""

    def rates(config: Configuration, running: Sequence[int]) -> dict[int, Span]:
        if config.drafter is None:
            if Drafter.EAGLE3 not in ov.cycle:
                raise ModelInputError("no measured EAGLE-3 overhead: fit the speculation model on a grid first")
            return {r.streams: r.plain_tokens_per_s for r in gains(box, ov, Drafter.EAGLE3, 1.0, 2, running)}
        rows = gains(box, ov, config.drafter, config.accept, config.draft_tokens, running)
        return {r.streams: r.spec_tokens_per_s for r in rows}

    return rates


def _ranges(rates: RateSource, config: Configuration, running: Sequence[int]) -> dict[int, tuple[Span, Span]]:
    """Per running-request count: all streams' tok/s and the time per output token (ms), each a range."""
    by = rates(config, running)
    missing = [c for c in running if c not in by]
    if missing:
        raise ModelInputError(
            f"{config.words()}: no rate at {', '.join(map(str, missing))} running (beyond the evidence's streams): "
            "lower --load"
        )
    return {c: (rate, Span(c * 1e3 / rate.high, c * 1e3 / rate.low)) for c, rate in by.items()}


def prefill_ms(box: Box, ov: Overheads, prompt_tokens: int) -> Span:
    """One prompt's prefill pass on its own: its bytes and arithmetic, its all-reduces and the per-pass overhead."""
    return Span.of(*(price_prefill(box, ov, prompt_tokens, s).total_ms for s in scenarios(box)))


def price(
    box: Box,
    ov: Overheads,
    config: Configuration,
    loads: Sequence[int],
    slo: Slo,
    prompt_tokens: int,
    output_tokens: int,
    rates: RateSource | None = None,
) -> list[CellPrediction]:
    """``config`` at each offered load (closed loop, module docstring); ``rates``: where the rates come from (default:
    the speculation model on ``box``)."""
    running = sorted({min(c, config.max_running) for c in loads})
    by_running = _ranges(rates or model_rates(box, ov), config, running)
    prefill = prefill_ms(box, ov, prompt_tokens)
    cells = []
    for load in loads:
        m = min(load, config.max_running)
        rate, tpot = by_running[m]
        waits = (load - m) / m  # request durations a request waits for a free slot
        ttft = Span(
            prefill.low + tpot.low + waits * output_tokens * tpot.low,
            prefill.high + tpot.high + waits * output_tokens * tpot.high,
        )
        good_low = rate.low if tpot.high <= slo.tpot_ms and ttft.high <= slo.ttft_ms else 0.0
        good_high = rate.high if tpot.low <= slo.tpot_ms and ttft.low <= slo.ttft_ms else 0.0
        cells.append(CellPrediction(load, rate, tpot, ttft, Span(good_low, good_high)))
    return cells


def plan_streams(load: int) -> tuple[int, ...]:
    """The stream counts a check measures: half the load, the load, twice the load."""
    return tuple(sorted({max(load // 2, 1), load, min(2 * load, MAX_STREAMS)}))


def plan_minutes(plan_cells: Sequence[Sequence[CellPrediction]], output_tokens: int, startup_s: float) -> float:
    """Minutes to start each server and sweep its cells (``max(2C, 8)`` requests a cell, as the sweep sends), at the
    slow end of each predicted time per token and first token."""
    seconds = 0.0
    for cells in plan_cells:
        seconds += startup_s
        for cell in cells:
            requests = max(2 * cell.streams, 8)
            rounds = math.ceil(requests / cell.streams)
            seconds += rounds * (cell.ttft_ms.high + output_tokens * cell.tpot_ms.high) / 1e3
    return seconds / 60.0


def goodput_rank(p: Priced) -> tuple[float, float, float, int]:
    """How a priced configuration ranks (higher first): goodput's pessimistic end, then its optimistic end; where none
    meets the SLO, the most throughput; then the shorter chain."""
    g = p.at_load.goodput
    return (g.low, g.high, p.at_load.tokens_per_s.low, -p.config.draft_tokens)


def choose(
    box: Box,
    ov: Overheads,
    load: int,
    slo: Slo,
    accept: float,
    stated_for: int,
    prompt_tokens: int = 256,
    output_tokens: int = 128,
    budget_minutes: float = 10.0,
    startup_s: float = STARTUP_S,
    rates: RateSource | None = None,
    chains: Sequence[int] = DRAFT_TOKENS,
    refuse_over_budget: bool = True,
    stream_cap: int | None = None,
    other_collective: Priced | None = None,
) -> BoxPlan:
    """The configuration with the most goodput under ``slo`` at ``load`` streams, the runner-up (the best of another
    drafter or chain), plain decoding, and the plan that measures the three (and ``other_collective``, the best on the
    all-reduce not launched, where the two tie); refused when the plan does not fit ``budget_minutes`` and it is to be
    measured (``refuse_over_budget``; the error names the minutes it needs). ``stream_cap``: the distinct streams the
    KV pool holds at the context (the load and the sweep capped at it)."""
    if not 1 <= load <= MAX_STREAMS:
        raise ModelInputError(f"--load {load!r}: the concurrent streams you serve, 1 to {MAX_STREAMS}")
    streams = plan_streams(load)
    if stream_cap is not None:  # distinct sessions beyond the pool would queue: the sweep stays within it
        if stream_cap < 1:
            raise ModelInputError("the KV pool holds not one stream of the stated context: raise --tp or shorten it")
        streams = tuple(sorted({min(s, stream_cap) for s in streams}))
        load = min(load, stream_cap)
    priced = []
    for config in candidates(load, accept, stated_for, chains):
        cells = price(box, ov, config, sorted({load, *streams}), slo, prompt_tokens, output_tokens, rates)
        at = {c.streams: c for c in cells}
        priced.append(Priced(config, at[load], tuple(at[c] for c in streams)))

    ordered = sorted(priced, key=goodput_rank, reverse=True)
    chosen = ordered[0]
    kind = (chosen.config.drafter, chosen.config.draft_tokens)
    runner_up = next(p for p in ordered if (p.config.drafter, p.config.draft_tokens) != kind)
    plain = max((p for p in priced if p.config.drafter is None), key=goodput_rank)
    other = () if other_collective is None else (other_collective,)
    minutes = plan_minutes([p.cells for p in (*_unique((chosen, runner_up, plain)), *other)], output_tokens, startup_s)
    if refuse_over_budget and minutes > budget_minutes:
        measured = "the choice, the runner-up and plain decoding"
        if other:
            measured = "the choice, the runner-up, plain decoding and the other all-reduce's best (a tie)"
        raise ModelInputError(
            f"--budget-minutes {budget_minutes:g}: measuring {measured} at {', '.join(map(str, streams))} streams "
            f"needs about {math.ceil(minutes)} minutes of GPU time ({startup_s:g} s to start each server); give at "
            "least that, or a smaller --load"
        )
    return BoxPlan(
        load,
        slo,
        chosen,
        runner_up,
        plain,
        streams,
        minutes,
        budget_minutes,
        {
            "load": f"{load} concurrent streams",
            "slo": f"time to first token <= {slo.ttft_ms:g} ms, time per output token <= {slo.tpot_ms:g} ms",
            "accept": f"{accept:g} tokens per verify with {stated_for} draft tokens (other chains: one acceptance "
            "probability per draft token)",
            "traffic": f"{prompt_tokens} prompt tokens, {output_tokens} output tokens per request",
            "startup": f"{startup_s:.0f} s per server (scaled by the weights each GPU loads; a floor: measure yours)",
        },
        other_collective=other_collective,
    )


def _unique(items: Sequence[Priced]) -> list[Priced]:
    """``items`` in order, each configuration once (plain decoding may be the runner-up too)."""
    out: list[Priced] = []
    for p in items:
        if all(p.config != q.config for q in out):
            out.append(p)
    return out
