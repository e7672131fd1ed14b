"""Fusion vs elimination, priced per communication regime: each option's verify pass at C concurrent streams x k
draft tokens (T = C x k tokens per pass), as a range, within physical floors.

Every term is computed at the option's own message size and layout:
- **compute** never below the bytes the busiest GPU reads at peak bandwidth (:mod:`verifylab.model.floors`); the
  range divides that floor by the efficiency the measured H200 pass reached against its own floor — at matched
  tokens (high end) and at its best (low end);
- **communication**: the count of collectives the option keeps, each priced in the regime at its true message
  (:mod:`verifylab.model.regimes`), bandwidth terms included;
- **norms**: SGLang's fused add+RMSNorm kernel per all-reduce where the all-reduce is not fused (measured, H200).

Options (Kimi-K2.5 INT4, one box of eight 96 GB GPUs):
- *TP 8, NCCL* (as the case study ran it): 122 all-reduces of T x 7168 bf16;
- *TP 8, FlashInfer fusion*: the same 122 all-reduces, each FlashInfer's one-shot (two-shot past its threshold)
  push with the norm inside, at its in-pass cost; needs working P2P;
- *TP 4 x PP 2*: fewer ranks per all-reduce (4), not fewer all-reduces; one stream walks both stages in turn,
  several streams fill the pipeline as two micro-batches;
- *EP 8, TP attention*: experts whole on their GPUs; the experts' outputs are still summed by the same
  all-reduce (122 stay) and the busiest GPU reads whole experts;
- *DP attention + EP 8 (all-to-all)*: attention per request on its GPU (weights replicated), experts whole;
  the all-reduces become a dispatch and a combine all-to-all per MoE layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from verifylab.derived import derived
from verifylab.errors import ModelInputError
from verifylab.model.case.box import CASE_CONTEXT, case_study_box
from verifylab.model.case.cycle import CycleAccount
from verifylab.model.fits.context import context_terms
from verifylab.model.fits.grid import measured_overheads
from verifylab.model.fits.in_pass import regime_curves
from verifylab.model.inputs.curves import loglog_interpolate
from verifylab.model.inputs.model_costs import Layout
from verifylab.model.inputs.stored import StoredInputs
from verifylab.model.pricing.attention import DEFAULT_MEM_FRACTION
from verifylab.model.pricing.boxes import calibrate_decode
from verifylab.model.pricing.collectives import RegimeCurves
from verifylab.model.pricing.floors import pass_floor_ms
from verifylab.model.pricing.pricer import price_verify, scenarios
from verifylab.reported import reported_value
from verifylab.shapes import KIMI_K2
from verifylab.span import Span
from verifylab.vocab import KIMI_K2_HIDDEN, PCIE_IPC_FLASHINFER, PCIE_IPC_SGLANG, Regime

GPUS = 8


CONTEXT_TOKENS = CASE_CONTEXT  # KV each stream has read per pass (stated: the H200 passes used the same)


MEM_FRACTIONS = (DEFAULT_MEM_FRACTION, 0.95)  # SGLang's static memory fraction, two settings


GIB = 2**30


MOE_LAYERS = KIMI_K2.layers - KIMI_K2.dense_layers


class Option(StrEnum):
    TP8_NCCL = "tp8_nccl"
    TP8_FUSED = "tp8_fused"
    TP8_PCIE_IPC = "tp8_pcie_ipc"
    TP4_PP2 = "tp4_pp2"
    EP8_TP_ATTENTION = "ep8_tp_attention"
    DP_ATTENTION_EP8 = "dp_attention_ep8"


@dataclass(frozen=True)
class OptionFacts:
    title: str
    kind: str  # as run / fusion / fewer ranks / elimination
    what: str
    flags: str
    eagle3: str  # does SGLang run it with EAGLE-3 (read from the wheels)


OPTIONS: dict[Option, OptionFacts] = {
    Option.TP8_NCCL: OptionFacts(
        "TP 8, NCCL (as run)", "as run", "122 NCCL ring all-reduces, then the norm kernel", "--tp 8", "yes"
    ),
    Option.TP8_FUSED: OptionFacts(
        "TP 8, FlashInfer fusion",
        "fusion",
        "the same 122 all-reduces, each a one-shot push (two-shot past FlashInfer's threshold) with the norm inside",
        "--tp 8 --enable-flashinfer-allreduce-fusion (0.5.9), --flashinfer-allreduce-fusion-backend trtllm (0.5.14+)",
        "yes, where the gates are open and FlashInfer's workspace needs no multicast (chapter 1)",
    ),
    Option.TP8_PCIE_IPC: OptionFacts(
        "TP 8, PCIe-IPC all-reduce",
        "faster collective",
        "the same 122 all-reduces, each FlashInfer's staged PCIe push (one stream in and out per rank, 4+4 "
        "islands at 8 ranks), then the norm kernel",
        f"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1 with --tp 8: SGLang {PCIE_IPC_SGLANG}+ with FlashInfer "
        f"{PCIE_IPC_FLASHINFER}+ (SGLang 0.5.22 pins 0.7.1; 0.5.21 pins 0.6.18 and falls back to NCCL)",
        "yes (no refusal with speculative decoding in the 0.5.22 wheel)",
    ),
    Option.TP4_PP2: OptionFacts(
        "TP 4 x PP 2",
        "fewer ranks per all-reduce",
        "122 all-reduces among 4 GPUs instead of 8, one activation send per stage boundary; a stream walks both "
        "stages in turn",
        "--tp 4 --pp-size 2",
        "no: SGLang 0.5.9 and 0.5.17 refuse pipeline parallelism with speculative decoding (server_args.py: "
        "'Pipeline parallelism is not compatible with ... speculative decoding')",
    ),
    Option.EP8_TP_ATTENTION: OptionFacts(
        "EP 8, TP attention",
        "expert placement",
        "experts whole on their GPUs; the 122 all-reduces stay (the experts' outputs are summed by the same "
        "all-reduce); the busiest GPU reads whole experts",
        "--tp 8 --ep-size 8",
        "yes (no refusal in 0.5.9 or 0.5.17)",
    ),
    Option.DP_ATTENTION_EP8: OptionFacts(
        "DP attention + EP 8 (all-to-all)",
        "elimination",
        f"no all-reduce: a dispatch and a combine all-to-all per MoE layer ({2 * MOE_LAYERS}); attention per "
        "request on its GPU with replicated weights",
        "--tp 8 --enable-dp-attention --dp 8 --ep-size 8 --moe-a2a-backend deepep",
        "yes for EAGLE/EAGLE-3 (only STANDALONE is refused with DP attention); DeepEP targets NVLink/RDMA, not PCIe",
    ),
}


# ------------------------------------------------------------------------------------------ model inputs
@dataclass
class ModelInputs:
    """What every option is priced from, built once per ModelSources."""

    curves: RegimeCurves
    norm_us: Callable[[float], float]
    norm_source: str
    account: CycleAccount


@dataclass(frozen=True)
class NormCurve:
    """The measured norm kernel's time (µs) by tokens, held at its ends (a value: it pickles, as the interactive
    commands keep derived values on disk)."""

    tokens: tuple[float, ...]
    us: tuple[float, ...]

    def __call__(self, t: float) -> float:
        return loglog_interpolate(self.tokens, self.us, min(max(t, self.tokens[0]), self.tokens[-1]))


def _norm(stored: StoredInputs) -> tuple[Callable[[float], float], str]:
    norm = stored.runs.norm
    if norm is None:
        raise ModelInputError(f"no run under {stored.runs.where} measured the norm kernel (table norm_fusion)")
    return NormCurve(norm.tokens, norm.us), f"measured, run {norm.run_id} (H200)"


@derived
def model_inputs(stored: StoredInputs, account: CycleAccount) -> ModelInputs:
    """The inputs of every option for this evidence (the reported regime from the account and the pricer)."""
    norm, norm_source = _norm(stored)
    partial = ModelInputs(regime_curves(stored), norm, norm_source, account)
    partial.curves.reported_allreduce = reported_allreduce_range(stored, partial)
    return partial


def reported_pass_floor(account: CycleAccount) -> Span:
    """The floor of the case study's verify pass (one stream, its draft-token range): the one value every page
    quotes for it."""
    return Span.of(*(pass_floor_ms(k, Layout.TP, GPUS, CONTEXT_TOKENS) for k in account.draft_tokens))


def reported_allreduce_range(stored: StoredInputs, inputs: ModelInputs) -> tuple[float, float, float]:
    """What one all-reduce of the case study's verify pass cost: the reported pass less what the pricer puts beside
    its all-reduces — the busiest GPU's bytes and arithmetic, and the host overhead calibrated to the reported plain
    decode rate (its all-reduces healthy: chapter 4) — over its all-reduces, at every end of the inputs' ranges
    and over the draft-token range (low us, high us, and the message of the shortest chain, bytes)."""
    a = inputs.account
    k = a.draft_tokens[0]
    box = case_study_box(
        inputs.curves, stored.runs.ceilings, Regime.HEALTHY_P2P, Regime.HEALTHY_P2P, attention=context_terms(stored)
    )
    decode = reported_value(stored.figures, "baseline_92_6")
    ov = calibrate_decode(box, measured_overheads(stored.runs), decode, "reported plain decoding").overheads
    priced = [
        price_verify(box, ov, tokens, 1, s, end)
        for tokens in a.draft_tokens
        for s in scenarios(box)
        for end in ("low", "high")
    ]
    per = [(a.verify_ms - v.physics_ms - v.host_pass_ms - v.host_streams_ms) * 1e3 / a.allreduces for v in priced]
    return max(min(per), 0.0), min(max(per), a.allreduce_us_before), k * KIMI_K2_HIDDEN * 2
