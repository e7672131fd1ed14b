"""Reconciliation of the case study's reported figures, step by step, with the arithmetic shown.

Each step names the reported figures it uses (by ``figure_id`` in ``data/reference``), the formula with
numbers substituted, the result and a verdict. Inputs that are not reported are labelled assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from verifylab.model.costmodel import CaseInputs, LinkLatency, case_inputs, solve_allreduce_us
from verifylab.store.reference import reported_value

# Stated assumptions (not reported by the sources); the chapter lists them.
ASSUMED_DRAFT_TOKENS = 4  # SGLang EAGLE-3 commonly: 3 steps, top-k 1, 4 draft tokens; the seeds do not say
PCIE_GEN5_X16_GBS = 50.0  # 32 GT/s x 16 lanes ~ 63 GB/s per direction; ~50 effective assumed


@dataclass
class Step:
    """One line of the reconciliation."""

    step: str
    figures: str
    arithmetic: str
    value: float
    unit: str
    verdict: str


def reported_case(
    figures: pd.DataFrame,
    norm_us_unfused: float,
    norm_us_fused: float,
    draft_tokens: int = ASSUMED_DRAFT_TOKENS,
    sources_norm: str = "assumed",
) -> CaseInputs:
    """The verify pass of the case study as model inputs (reported figures + stated assumptions)."""
    verify = reported_value(figures, "verify_total_ms")
    share = reported_value(figures, "verify_cycle_share_pct") / 100.0
    allreduces = int(reported_value(figures, "allreduces_per_verify"))
    ring_us = reported_value(figures, "verify_allreduce_ms") * 1e3 / allreduces
    link = calibrated_link(ring_us, draft_tokens)
    case = case_inputs(
        layers=allreduces // 2,
        allreduces_per_layer=2,
        draft_tokens=draft_tokens,
        verify_ms=verify,
        verify_allreduce_ms=reported_value(figures, "verify_allreduce_ms"),
        accept_length=reported_value(figures, "accept_length"),
        draft_ms=verify * (1 / share - 1),
        norm_us_unfused=norm_us_unfused,
        norm_us_fused=norm_us_fused,
        oneshot_allreduce_us=ring_us,  # replaced below by the solved value
        link_bound_oneshot_us=link.oneshot_us(draft_tokens * 7168 * 2, 8),
        sources={
            "verify_ms, verify_allreduce_ms, accept_length, allreduces": "reported (seed 000)",
            "draft_ms": "reported: verify = 97 % of the cycle (seed 000)",
            "draft_tokens": f"assumption: {draft_tokens} (not reported)",
            "norm_us": sources_norm,
            "oneshot_allreduce_us": "modelled: solved so that the fused path reproduces the reported 96.1 tok/s "
            "at the reported accept length (the CUDA-upgrade share is not removed: an upper bound on what "
            "substitution must deliver)",
            "link_bound_oneshot_us": f"modelled: one hop of an alpha-beta link calibrated so a ring all-reduce takes "
            f"the reported {ring_us:.0f} us (alpha {link.alpha_us:.1f} us/step, {PCIE_GEN5_X16_GBS:.0f} GB/s assumed)",
        },
    )
    solved = solve_allreduce_us(case, reported_value(figures, "eagle3_fusion_96_1"))
    return case.model_copy(update={"oneshot_allreduce_us": solved})


def calibrated_link(
    ring_us: float, tokens: int, ranks: int = 8, bandwidth_gbs: float = PCIE_GEN5_X16_GBS
) -> LinkLatency:
    """The per-step alpha that makes a ring all-reduce of ``tokens`` x 14 KiB take ``ring_us``."""
    msg = tokens * 7168 * 2
    steps = 2 * (ranks - 1)
    wire_us = (steps / ranks) * msg / (bandwidth_gbs * 1e3)
    return LinkLatency(alpha_us=max((ring_us - wire_us) / steps, 1e-3), bandwidth_gbs=bandwidth_gbs)


def reconcile(figures: pd.DataFrame, norm_saving_us: float, draft_tokens: int = ASSUMED_DRAFT_TOKENS) -> pd.DataFrame:
    """The reconciliation table. ``norm_saving_us``: unfused minus fused add+RMSNorm per all-reduce."""
    v = lambda fid: reported_value(figures, fid)  # noqa: E731 - a short local alias reads best here
    steps: list[Step] = []
    n_ar, layers = v("allreduces_per_verify"), 61
    steps.append(
        Step(
            "all-reduces per forward",
            "allreduces_per_verify",
            f"2 x {layers} layers = {2 * layers:.0f}",
            2 * layers,
            "count",
            "consistent"
            if n_ar == 2 * layers
            else "inconsistent"
            " (plus the vocab-parallel embedding's all-reduce: 123 if counted; the logits all-gather is not "
            "an all-reduce)",
        )
    )
    per_ar = v("verify_allreduce_ms") * 1e3 / n_ar
    steps.append(
        Step(
            "latency per all-reduce in verify",
            "verify_allreduce_ms, allreduces_per_verify",
            f"{v('verify_allreduce_ms'):.0f} ms / {n_ar:.0f} = {per_ar:.1f} us",
            per_ar,
            "us",
            "implied",
        )
    )
    decode_ms = 1e3 / v("baseline_92_6")
    decode_cap = decode_ms * 1e3 / n_ar
    steps.append(
        Step(
            "upper bound per all-reduce in decode",
            "baseline_92_6",
            f"1000 / {v('baseline_92_6'):.1f} tok/s = {decode_ms:.2f} ms per step; / {n_ar:.0f} = "
            f"{decode_cap:.1f} us even with zero compute",
            decode_cap,
            "us",
            f"inconsistent with {per_ar:.0f} us in verify: decode all-reduces are at least "
            f"{per_ar / decode_cap:.1f}x cheaper, so verify's run differently",
        )
    )
    msg = draft_tokens * 7168 * 2
    wire_us = 2 * 7 / 8 * msg / (PCIE_GEN5_X16_GBS * 1e3)
    steps.append(
        Step(
            "message size cannot explain it",
            "(assumption: draft tokens, PCIe bandwidth)",
            f"ring moves 2x7/8 x {msg / 1024:.0f} KiB = {2 * 7 / 8 * msg / 1024:.0f} KiB per rank; at "
            f"{PCIE_GEN5_X16_GBS:.0f} GB/s that is {wire_us:.1f} us of {per_ar:.0f} us",
            wire_us,
            "us",
            "latency-bound: bandwidth is < 2 % of the per-all-reduce time",
        )
    )
    cycle = v("verify_total_ms") / (v("verify_cycle_share_pct") / 100)
    tput = v("accept_length") / cycle * 1e3
    steps.append(
        Step(
            "EAGLE-3 tok/s implied by verify share and accept length",
            "verify_total_ms, verify_cycle_share_pct, accept_length",
            f"cycle = {v('verify_total_ms'):.0f} / {v('verify_cycle_share_pct') / 100:.2f} = {cycle:.2f} ms; "
            f"{v('accept_length'):.1f} / {cycle:.2f} ms = {tput:.1f} tok/s",
            tput,
            "tok/s",
            f"reported 54.1 / 54.8 / 60: within {abs(tput - 60) / 60:.0%} of 60 and "
            f"{abs(tput - 54.1) / 54.1:.0%} of 54.1 — the figures come from different runs",
        )
    )
    cycle_before = v("accept_length") / v("eagle3_54_1") * 1e3
    cycle_after = v("accept_length") / v("eagle3_fusion_96_1") * 1e3
    gain_ms = cycle_before - cycle_after
    steps.append(
        Step(
            "cycle time removed by 54.1 -> 96.1 tok/s (accept length unchanged)",
            "eagle3_54_1, eagle3_fusion_96_1, accept_length",
            f"{v('accept_length'):.1f}/54.1 = {cycle_before:.2f} ms -> {v('accept_length'):.1f}/96.1 = "
            f"{cycle_after:.2f} ms; removed {gain_ms:.2f} ms",
            gain_ms,
            "ms",
            "to be shared among the factors below",
        )
    )
    draft_ms = v("verify_total_ms") * (100 / v("verify_cycle_share_pct") - 1)
    compute_ms = v("verify_compute_ms")
    per_ar_after = (cycle_after - draft_ms - compute_ms) * 1e3 / n_ar
    steps.append(
        Step(
            "per-all-reduce latency implied after",
            "eagle3_fusion_96_1, verify_compute_ms",
            f"({cycle_after:.2f} - draft {draft_ms:.2f} - compute {compute_ms:.0f}) ms / {n_ar:.0f} = "
            f"{per_ar_after:.1f} us (was {per_ar:.1f})",
            per_ar_after,
            "us",
            f"{1 - per_ar_after / per_ar:.0%} lower per all-reduce, same count",
        )
    )
    upgrade = v("baseline_92_6") / v("baseline_89_5")
    upgrade_ms = cycle_before * (1 - 1 / upgrade)
    steps.append(
        Step(
            "share the CUDA 12.8 -> 13 upgrade could carry",
            "baseline_89_5, baseline_92_6",
            f"baseline x{upgrade:.3f}; applied to the whole cycle: {cycle_before:.2f} x (1 - 1/{upgrade:.3f}) "
            f"= {upgrade_ms:.2f} ms",
            upgrade_ms,
            "ms",
            f"{upgrade_ms / gain_ms:.0%} of the gain at most",
        )
    )
    fusion_ms = n_ar * norm_saving_us / 1e3
    steps.append(
        Step(
            "share kernel fusion could carry",
            "allreduces_per_verify; measured norm saving",
            f"{n_ar:.0f} x {norm_saving_us:.1f} us = {fusion_ms:.2f} ms",
            fusion_ms,
            "ms",
            f"{fusion_ms / gain_ms:.0%} of the gain (the sources estimated 2-8 ms)",
        )
    )
    rest_ms = gain_ms - upgrade_ms - fusion_ms
    rest_per_ar = rest_ms * 1e3 / n_ar
    steps.append(
        Step(
            "left for algorithm substitution",
            "the three lines above",
            f"{gain_ms:.2f} - {upgrade_ms:.2f} - {fusion_ms:.2f} = {rest_ms:.2f} ms; / {n_ar:.0f} = "
            f"{rest_per_ar:.0f} us less per all-reduce ({per_ar:.0f} -> {per_ar - rest_per_ar:.0f} us)",
            rest_ms,
            "ms",
            f"{rest_ms / gain_ms:.0%} of the gain: the leading hypothesis, unmeasured",
        )
    )
    steps.append(
        Step(
            "elimination needed to match",
            "allreduces_per_verify",
            f"{gain_ms:.2f} ms / ({per_ar:.0f} us + {norm_saving_us:.0f} us norm) = "
            f"{gain_ms * 1e3 / (per_ar + norm_saving_us):.0f} of {n_ar:.0f} all-reduces",
            gain_ms * 1e3 / (per_ar + norm_saving_us),
            "count",
            "what eliminating all-reduces would have to remove for the same gain",
        )
    )
    base = [v(f) for f in ("baseline_82", "baseline_89_5", "baseline_90", "baseline_92_6")]
    steps.append(
        Step(
            "baselines 82 / 89.5 / 90 / 92.6",
            "baseline_82, baseline_89_5, baseline_90, baseline_92_6",
            f"spread {min(base):.1f}-{max(base):.1f} = {max(base) / min(base) - 1:.1%}; 89.5 vs 90: "
            f"{v('baseline_90') / v('baseline_89_5') - 1:.1%}",
            max(base) / min(base) - 1,
            "ratio",
            "89.5 and 90 agree (CUDA 12.8 stack); 82 is an earlier, unspecified state; 92.6 follows the "
            "upgrade. A 'baseline' may itself be fused where SGLang auto-enables fusion for Kimi/DeepSeek",
        )
    )
    fusion_runs = figures[figures.figure_id.str.startswith("fusion_run_")]["value"]
    steps.append(
        Step(
            "baseline with vs without the fusion flag",
            "fusion_run_1..5, baseline_92_6",
            f"runs {fusion_runs.min():.1f}-{fusion_runs.max():.1f} (median {fusion_runs.median():.1f}) vs 92.6",
            fusion_runs.median() - v("baseline_92_6"),
            "tok/s",
            "no difference resolved: decode all-reduces were already cheap, or both runs were fused",
        )
    )
    return pd.DataFrame([s.__dict__ for s in steps]).assign(provenance="modelled from reported figures")


HYPOTHESES = pd.DataFrame(
    [
        {
            "hypothesis": "verify runs eagerly (not CUDA-graph captured): launch gaps and CPU sync per all-reduce",
            "measurement": "profile an EAGLE-3 cycle: cudaGraphLaunch for the verify pass, or per-kernel launches?",
            "status": "open",
        },
        {
            "hypothesis": "NCCL kernel time includes arrival skew (ranks reach each all-reduce at different times)",
            "measurement": "align per-rank traces and split each all-reduce into wait and transfer "
            "(verifylab trace summarize: comm_wait_us / comm_transfer_us)",
            "status": "instrument built; needs multi-GPU traces of the real server",
        },
        {
            "hypothesis": "a different NCCL algorithm/protocol is chosen at the verify message size",
            "measurement": "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING, or force NCCL_PROTO=LL and compare",
            "status": "open",
        },
        {
            "hypothesis": "message size (k x 14 KiB vs 14 KiB) makes verify all-reduces slower",
            "measurement": "arithmetic above: the bandwidth term is < 2 % of 205 us",
            "status": "refuted by arithmetic for k <= 16",
        },
        {
            "hypothesis": "profiler overhead inflated the 25 ms",
            "measurement": "wall-clock verify time with and without the profiler attached",
            "status": "open",
        },
        {
            "hypothesis": "algorithm substitution (NCCL ring -> one-shot push) carries most of 54.1 -> 96.1",
            "measurement": "EAGLE-3 without fusion on the CUDA 13 stack vs with fusion, same drafter and flags, "
            "profiled (fused kernel names present, per-all-reduce latency)",
            "status": "leading hypothesis; unmeasured (no Blackwell here)",
        },
    ]
)
