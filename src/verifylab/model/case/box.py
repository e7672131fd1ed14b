"""The case study's box as the pricer takes it: Kimi-K2.5 (INT4 experts) over eight RTX PRO 6000 at TP 8, its verify
pass's all-reduces priced in a regime, its plain decoding's in the regime decoding ran in."""

from __future__ import annotations

from verifylab.model.inputs.configs import eagle3_draft_for, kimi_k25_costs
from verifylab.model.inputs.gpus import Ceilings, gpu_named
from verifylab.model.inputs.model_costs import Routing
from verifylab.model.pricing.attention import BYTES_ONCE_PER_PASS, DEFAULT_MEM_FRACTION, AttentionTerms
from verifylab.model.pricing.boxes import pcie_ipc_regime_curve, regime_curve
from verifylab.model.pricing.collectives import RegimeCurves
from verifylab.model.pricing.pricer import AllreduceCurve, Box
from verifylab.model.pricing.regimes import REGIME_TITLE, Collective
from verifylab.vocab import Regime

CASE_GPUS = 8


CASE_CONTEXT = 2048  # tokens of KV per stream (chapter 4's options use the same)


def case_study_box(
    curves: RegimeCurves,
    ceilings: Ceilings | None,
    regime: Regime,
    decode_regime: Regime,
    verify: tuple[AllreduceCurve, str] | None = None,
    collective: Collective = Collective.NCCL,
    attention: AttentionTerms = BYTES_ONCE_PER_PASS,
) -> Box:
    """The case study's box: Kimi-K2.5 (INT4 experts) over eight RTX PRO 6000 at TP 8, its verify pass's
    all-reduces priced in ``regime`` (``verify``: another collective's curve and source), its plain decoding's in
    ``decode_regime``; the GPU at ``ceilings`` where they are the RTX PRO 6000's. Fusion covers the target's layers
    only (the draft stays on NCCL, and so does plain decoding, the baseline); the PCIe-IPC all-reduce replaces the
    group's every all-reduce."""
    target = kimi_k25_costs()
    nccl, source = regime_curve(curves, regime, CASE_GPUS)
    verify_curve, source = verify or (nccl, source)
    decode, _ = regime_curve(curves, decode_regime, CASE_GPUS)
    draft = nccl
    if collective is Collective.PCIE_IPC:
        draft = verify_curve
        decode = (pcie_ipc_regime_curve(curves, decode_regime, CASE_GPUS, target.hidden) or (decode, ""))[0]
    gpu = gpu_named("rtx-pro-6000", ceilings)
    return Box(
        target,
        gpu,
        tp=CASE_GPUS,
        draft=eagle3_draft_for(target),
        context=CASE_CONTEXT,
        attention=attention,
        mem_fraction=DEFAULT_MEM_FRACTION,
        routing=Routing.UNIFORM,
        allreduce_us=verify_curve,
        decode_allreduce_us=decode,
        draft_allreduce_us=draft,
        comm_source=source
        + (f"; plain decoding's in {REGIME_TITLE[decode_regime]}" if decode_regime != regime else ""),
    )
