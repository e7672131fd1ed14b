"""Fusion vs elimination for the case study's verify pass, as ranges: each option's verify time and one stream's
tok/s at C concurrent streams, from the cycle account (reported), the measured H200 compute and norm costs, and
a labelled link model for the PCIe communication nobody here measured.

Options (Kimi-K2-class MoE, TP 8, one PCIe box of eight 96 GB GPUs):
- *kernel fusion*: the add+RMSNorm goes into the all-reduce kernel; count and latency of all-reduces unchanged;
- *fusion, one-shot bound*: also the one-shot push instead of NCCL's ring, at the link model's one-hop latency
  (an optimistic bound: nothing measured it on PCIe);
- *DP attention*: attention data-parallel, MoE still TP: the attention all-reduce goes, an all-gather and a
  reduce-scatter come around the MoE, a stream's attention runs on one GPU, attention weights are replicated;
- *TP 4 x PP 2*: all-reduces among 4 GPUs (6 ring steps instead of 14), two pipeline stages that one stream
  walks in turn (compute of each layer on half the GPUs), one activation send between them;
- *EP 8*: experts whole on their GPUs, the MoE all-reduce becomes a dispatch and a combine all-to-all.
Norms stay where the all-reduces go: each layer still normalizes its output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from verifylab.model.comm_pass import loglog_interpolate
from verifylab.model.costmodel import LinkLatency, eagle3_tokens_per_s
from verifylab.model.cycle import CycleAccount, Reading
from verifylab.shapes import KIMI_K2, ShardShape, expected_distinct_experts, weight_bytes_per_layer
from verifylab.store.evidence import Evidence
from verifylab.store.runs import COMM_CAMPAIGN_TABLES
from verifylab.vocab import KIMI_K2_HIDDEN, SGLANG_FUSION_MAX_TOKENS, allreduce_message_bytes

PCIE_GEN5_X16_GBS = 50.0  # 32 GT/s x 16 lanes ~ 63 GB/s per direction; ~50 effective (assumption)
RANKS = 8
GPU_MEMORY_GB = 96.0  # RTX PRO 6000 Blackwell
INT4_BYTES = 0.5
LAYERS = 61


def calibrated_link(account: CycleAccount, tokens: int) -> LinkLatency:
    """An alpha-beta PCIe link whose per-step alpha makes NCCL's ring all-reduce at TP 8 take the reported
    per-all-reduce latency at ``tokens`` x hidden (modelled; bandwidth assumed)."""
    message = allreduce_message_bytes(tokens)
    steps = 2 * (RANKS - 1)
    wire = steps / RANKS * message / (PCIE_GEN5_X16_GBS * 1e3)
    return LinkLatency(
        alpha_us=max((account.allreduce_us_before - wire) / steps, 1e-3), bandwidth_gbs=PCIE_GEN5_X16_GBS
    )


@dataclass(frozen=True)
class Scaling:
    """How the verify pass's parts grow with tokens per pass, from measured runs where they exist."""

    compute: Callable[[float], float]  # a pass's compute at this many tokens (any unit: only ratios are used)
    comm: Callable[[float], float]  # one all-reduce's latency at this many tokens (ratios only)
    norm_us: Callable[[float], float]
    sources: dict[str, str]


def _loglog(xs: list[float], ys: list[float]) -> Callable[[float], float]:
    """The measured curve through (xs, ys), log-log, held at its end values outside the measured range."""
    points, values = tuple(xs), tuple(ys)
    return lambda x: loglog_interpolate(points, values, min(max(x, points[0]), points[-1]))


def _measured_range(table: pd.DataFrame) -> str:
    """The token counts a measured curve covers, as the reader sees them ("1-512 tokens")."""
    return f"{int(table['tokens'].min())}-{int(table['tokens'].max())} tokens"


def measured_scaling(ev: Evidence, account: CycleAccount) -> Scaling:
    sources = {}
    compute_run = ev.newest_with("shard_compute")
    if compute_run:
        t = ev.runs.read_table(compute_run, "shard_compute")
        t = t[t["norm"] == "flashinfer_fused"].sort_values("tokens")
        compute = _loglog(t["tokens"].tolist(), t["pass_ms_61_layers"].tolist())
        sources["compute"] = (
            f"grows as the measured TP-8 shard pass on an H200 (run {compute_run}, {_measured_range(t)}; held at "
            "the largest measured beyond it)"
        )
    else:
        shard = ShardShape(KIMI_K2, RANKS)
        compute = lambda k: weight_bytes_per_layer(shard, round(expected_distinct_experts(k)))  # noqa: E731
        sources["compute"] = "grows with the weight bytes a pass reads (modelled)"
    latency_run = ev.newest_with(*COMM_CAMPAIGN_TABLES)
    comm = lambda k: 1.0  # noqa: E731
    sources["comm"] = "constant per all-reduce (no measured curve)"
    if latency_run:
        lat = ev.runs.read_table(latency_run, "allreduce_latency")
        shm = lat[(lat["path"] == "shm") & (lat["impl"] == "nccl")].sort_values("tokens")
        if not shm.empty:
            comm = _loglog(shm["tokens"].tolist(), shm["us"].tolist())
            sources["comm"] = (
                f"every option's communication grows with the message as NCCL without P2P does (2 x H200 through "
                f"host memory, run {latency_run}, {_measured_range(shm)}; held at the largest measured beyond it)"
            )
    norm_run = ev.newest_with("norm_fusion")
    norm = lambda k: account.norm_us  # noqa: E731
    if norm_run:
        n = ev.runs.read_table(norm_run, "norm_fusion").sort_values("tokens")
        norm = _loglog(n["tokens"].tolist(), n["fused_us"].tolist())
    return Scaling(compute, comm, norm, sources)


def memory_gb(attention_replicas: int = 1, tp: int = RANKS) -> float:
    """Weights per GPU: attention (bf16) x replicas + routed experts (INT4) and the rest, over 61 layers."""
    shard = ShardShape(KIMI_K2, tp)
    attention = shard.attention_weight_elems() * 2 * attention_replicas
    experts = (KIMI_K2.experts + KIMI_K2.shared_experts) * shard.expert_weight_elems() * INT4_BYTES
    layers_here = LAYERS * tp / RANKS  # pipeline stages hold their share of the layers
    return (attention + experts + shard.router_weight_elems() * 2) * layers_here / 1e9


@dataclass(frozen=True)
class Pass:
    compute_ms: float
    comm_ms: float
    norm_ms: float
    allreduces: int

    @property
    def verify_ms(self) -> float:
        return self.compute_ms + self.comm_ms + self.norm_ms


def option_passes(account: CycleAccount, scaling: Scaling, streams: int, k: int) -> dict[str, tuple[Pass, str]]:
    """Every option's verify pass at ``streams`` x ``k`` tokens; -> (pass, what it removes and adds). The reported
    pass is taken to have run at ``k`` draft tokens (one stream): compute and communication grow from there as
    the measured curves grow; the link model prices other collectives at the reported message size."""
    tokens = streams * k
    link = calibrated_link(account, k)
    n = account.allreduces
    message = allreduce_message_bytes(k, KIMI_K2_HIDDEN)
    grow = scaling.comm(tokens) / scaling.comm(k)
    compute = (account.compute_ms - n * account.norm_us / 1e3) * scaling.compute(tokens) / scaling.compute(k)
    ar_us = account.allreduce_us_before * grow
    norms = n * scaling.norm_us(tokens) / 1e3 if streams > 1 else n * account.norm_us / 1e3
    fuses = tokens <= SGLANG_FUSION_MAX_TOKENS
    fused_norms = 0.0 if fuses else norms
    shard = ShardShape(KIMI_K2, RANKS)
    attention_share = (
        shard.attention_weight_elems() * 2 / weight_bytes_per_layer(shard, round(expected_distinct_experts(tokens)))
    )
    layers = n // 2
    return {
        "baseline": (Pass(compute, n * ar_us / 1e3, norms, n), "NCCL ring all-reduce, then the norm kernel"),
        "kernel_fusion": (
            Pass(compute, n * ar_us / 1e3, fused_norms, n),
            "removes the norm kernel after each all-reduce; count and latency unchanged",
        ),
        "fusion_oneshot_bound": (
            Pass(
                compute,
                n * (link.oneshot_us(message, RANKS) * grow if fuses else ar_us) / 1e3,
                0.0 if fuses else norms,
                n,
            ),
            "also one hop instead of 14 ring steps, at the link model's latency (optimistic bound)",
        ),
        "dp_attention": (
            Pass(
                compute * (1 + attention_share * (RANKS - 1)),  # unsharded attention weights, read per pass
                layers * 2 * link.gather_us(message, RANKS) * grow / 1e3,
                norms,
                0,
            ),
            f"removes the {layers} attention all-reduces; adds an all-gather and a reduce-scatter per layer "
            "around the MoE; a stream's attention runs on one GPU",
        ),
        "tp4_pp2": (
            Pass(
                compute * 2,
                (n * link.ring_us(message, RANKS // 2) + link.send_us(message)) * grow / 1e3,
                norms,
                n,
            ),
            "all-reduces among 4 GPUs (6 ring steps, not 14); adds one activation send and a second stage "
            "a stream walks through in turn",
        ),
        "ep8": (
            Pass(compute, (layers * ar_us + layers * 2 * link.gather_us(message, RANKS) * grow) / 1e3, norms, layers),
            f"removes the {layers} MoE all-reduces; adds a dispatch and a combine all-to-all per layer",
        ),
    }


OPTION_FACTS = {
    "baseline": ("TP 8 as run", "reported pass, split into its terms", memory_gb(), "runs (reported)"),
    "kernel_fusion": ("fusion: kernel fusion only", "measured norm kernel", memory_gb(), "needs the SM120 gates"),
    "fusion_oneshot_bound": (
        "fusion: kernel fusion + one-shot (bound)",
        "link model, alpha calibrated to the reported ring",
        memory_gb(),
        "needs FlashInfer >= 0.6.15 on PCIe (no multicast) and the gates",
    ),
    "dp_attention": (
        "elimination: DP attention",
        "link model + measured compute",
        memory_gb(attention_replicas=RANKS),
        "SGLang --enable-dp-attention; pays only with many streams",
    ),
    "tp4_pp2": ("elimination: TP 4 x PP 2", "link model + measured compute", memory_gb(tp=4), "SGLang --pp-size 2"),
    "ep8": (
        "elimination: EP 8",
        "link model",
        memory_gb(),
        "low: SGLang's all-to-all backends (DeepEP) target NVLink/RDMA, not PCIe",
    ),
}


def options_table(ev: Evidence, account: CycleAccount, streams: int = 1, k_point: int | None = None) -> pd.DataFrame:
    """One row per option at ``streams`` concurrent streams: verify ms and one stream's tok/s as a point (first
    reading, ``k_point`` draft tokens) and as a range over both readings and k in the account's draft-token
    range; what it removes and adds; weights per GPU and whether they fit."""
    scaling = measured_scaling(ev, account)
    ks = sorted({*account.draft_tokens, k_point or account.draft_tokens[0]})
    point_k = k_point or account.draft_tokens[0]
    passes = {k: option_passes(account, scaling, streams, k) for k in ks}  # every option, once per k
    rows = []
    for key, (title, basis, weights_gb, feasibility) in OPTION_FACTS.items():
        verify = {k: passes[k][key][0] for k in ks}
        rates = [tokens_per_s(verify[k].verify_ms, r) for k in ks for r in account.readings]
        point = verify[point_k]
        rows.append(
            {
                "option": title,
                "key": key,
                "streams": streams,
                "allreduces_per_pass": point.allreduces,
                "compute_ms": point.compute_ms,
                "comm_ms": point.comm_ms,
                "norm_ms": point.norm_ms,
                "verify_ms": point.verify_ms,
                "verify_ms_low": min(p.verify_ms for p in verify.values()),
                "verify_ms_high": max(p.verify_ms for p in verify.values()),
                "tokens_per_s": tokens_per_s(point.verify_ms, account.readings[0]),
                "tokens_per_s_low": min(rates),
                "tokens_per_s_high": max(rates),
                "removes_and_adds": passes[point_k][key][1],
                "weights_gb_per_gpu": weights_gb,
                "fits": weights_gb < GPU_MEMORY_GB * 0.9,
                "feasibility": feasibility,
                "basis": basis,
                "provenance": "modelled",
            }
        )
    return pd.DataFrame(rows)


def tokens_per_s(verify_ms: float, reading: Reading) -> float:
    """One stream's tok/s: accepted tokens per cycle over the cycle (draft time as in the reading)."""
    return eagle3_tokens_per_s(reading.accept, verify_ms, reading.draft_ms)
