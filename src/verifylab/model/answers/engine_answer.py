"""The engine an answer is for, and what its verify kernel adds to a cycle.

A public per-context matrix ran one engine (vLLM, its ``TRITON_MLA`` verify reading each stream's context once per
verified token). The owner may run SGLang: its attention backend is the one the audited code picks for the model's
shape on the GPU (:data:`SGLANG_DEFAULT_BACKEND`, chapter 1) unless the owner names one, and the kernel that verifies
a chain follows from it: Triton's serial extend (a loop over each stream's whole prefix per layer, priced from the
stored engine runs' growth scaled by layers and heads per GPU), Triton's split-KV (needs a patched SGLang: priced
from its stored growth, never in a launch line) or FlashInfer's (each stream's KV read once per pass at the GPU's
bandwidth). The transfer keeps everything of the matrix but its verify's growth with context."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from verifylab.errors import ModelInputError
from verifylab.model.answers.context_answer import PoolCap, matching_matrix
from verifylab.model.fits.context import VerifyGrowth
from verifylab.model.fits.matrix_holdout import holdout_miss
from verifylab.model.fits.verify_growth import splitkv_rate
from verifylab.model.fits.verify_kernels import serial_rate
from verifylab.model.inputs.configs import eagle3_draft_for, kimi_k25_costs, read_config_and_json
from verifylab.model.inputs.context_matrix import ContextMatrix
from verifylab.model.inputs.gpus import GPU_TABLE, Gpu, gpu_named
from verifylab.model.inputs.model_costs import ModelCosts
from verifylab.model.inputs.stored import StoredRuns, stored_inputs
from verifylab.model.pricing.attention import DEFAULT_MEM_FRACTION, kv_pool_tokens
from verifylab.model.pricing.verify_kernels import (
    KV_DTYPE_BYTES,
    AttentionShape,
    SerialRate,
    VerifyKernel,
    attention_shape,
    verify_layer_ms,
)
from verifylab.shapes import KIMI_K2
from verifylab.sources import ModelSources
from verifylab.span import Span
from verifylab.vocab import Drafter


class Engine(StrEnum):
    """The serving engine an answer is for."""

    SGLANG = "sglang"
    VLLM = "vllm"


ATTENTION_BACKENDS = ("triton", "flashinfer")  # the SGLang backends the verify is priced for
# SGLang's default attention backend for an EAGLE-3 chain (topk 1) with FlashInfer installed and no
# --attention-backend, per model shape and GPU: the audited code of SGLang 0.5.9 to 0.5.23 (data/gates/verify_path.csv,
# 'default attention backend'; a test holds this table to the stored one). fa3 and trtllm_mha read the KV once per pass.
SGLANG_DEFAULT_BACKEND = {
    ("MLA", "SM90"): "fa3",
    ("MLA", "SM100"): "flashinfer",
    ("MLA", "SM120"): "triton",
    ("dense", "SM90"): "fa3",
    ("dense", "SM100"): "trtllm_mha",
    ("dense", "SM120"): "flashinfer",
}
# Kimi-K2.5's config.json as published, the fields the answers read: its attention (Kimi-K2's: 64 MLA heads, latent
# 512 + rope 64) and its remote code (auto_map); the case study's model where no config is given
KIMI_ATTENTION = {"num_attention_heads": KIMI_K2.heads, "kv_lora_rank": KIMI_K2.kv_lora_rank,
                  "qk_rope_head_dim": KIMI_K2.qk_rope_dim,
                  "auto_map": {"AutoConfig": "configuration_kimi_k25.KimiK25Config"}}  # fmt: skip


def served_model(config: Path | None, expert_bits: float | None = None) -> tuple[ModelCosts, dict[str, Any]]:
    """The served model's costs and its config's fields (``config`` None: the case study's Kimi-K2.5)."""
    return read_config_and_json(config, expert_bits) if config is not None else (kimi_k25_costs(), KIMI_ATTENTION)


# SGLang's --kv-cache-dtype for a KV dtype the answers price (bf16: its default, no flag)
SGLANG_KV_DTYPE = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
NEEDS_PATCH = "needs a patched SGLang (its split-KV gate opens on AMD gfx95 only): priced, never in a launch line"


@dataclass(frozen=True)
class EngineChoice:
    """The engine, attention backend, verify kernel and KV dtype an answer prices, and how each was chosen."""

    engine: Engine
    backend: str
    kernel: VerifyKernel | None  # None: the matrix's own verify (vLLM)
    kv_dtype: str
    said: str

    @property
    def launch_refusal(self) -> str | None:
        """Why no SGLang launch line serves this choice (None: one does)."""
        if self.engine is Engine.VLLM:
            return "vLLM answers are the public matrices' prices only: no SGLang command serves them"
        if self.kernel is VerifyKernel.SPLIT_KV:
            return f"the split-KV verify {NEEDS_PATCH}"
        return None

    def words(self) -> str:
        if self.engine is Engine.VLLM:
            return f"vLLM as the public matrix ran it ({self.said})"
        kernel = "" if self.kernel is None else f", verify kernel {self.kernel.value}"
        patched = f"; {NEEDS_PATCH}" if self.kernel is VerifyKernel.SPLIT_KV else ""
        return f"SGLang, attention backend {self.backend}{kernel}, KV {self.kv_dtype} ({self.said}){patched}"


def engine_choice(
    engine: str,
    backend: str | None,
    kernel: str | None,
    kv_dtype: str | None,
    *,
    mla: bool,
    arch: str,
    matrix_kv: str | None,
) -> EngineChoice:
    """What the owner named, the rest by default: SGLang's default backend for the shape and GPU, its serial kernel on
    Triton, the matrix's KV dtype where one matched (else bf16). One line naming the flag that cannot be priced."""
    if engine not in {e.value for e in Engine}:
        raise ModelInputError(f"--engine {engine!r}: choose sglang or vllm")
    if kv_dtype is not None and kv_dtype not in KV_DTYPE_BYTES:
        raise ModelInputError(f"--kv-cache-dtype {kv_dtype!r}: choose {', '.join(sorted(KV_DTYPE_BYTES))}")
    kv = kv_dtype or matrix_kv or "bf16"
    kv_said = "KV as given" if kv_dtype else ("KV as the matrix ran it" if matrix_kv else "KV bf16 by default")
    if Engine(engine) is Engine.VLLM:
        if backend is not None or kernel is not None:
            raise ModelInputError(
                "--engine vllm: its answers are the public matrices' own prices; --attention-backend and "
                "--verify-kernel choose SGLang's verify"
            )
        return EngineChoice(Engine.VLLM, "the matrix's", None, kv, kv_said)
    shape = "MLA" if mla else "dense"
    default = SGLANG_DEFAULT_BACKEND.get((shape, arch))
    if backend is not None and backend not in ATTENTION_BACKENDS:
        raise ModelInputError(f"--attention-backend {backend!r}: choose {' or '.join(ATTENTION_BACKENDS)}")
    chosen = backend or default or "triton"
    said = "backend as given" if backend else f"SGLang's default for {shape} on {arch or 'this GPU'} (chapter 1)"
    if kernel is not None and kernel not in {k.value for k in VerifyKernel}:
        raise ModelInputError(f"--verify-kernel {kernel!r}: choose {', '.join(k.value for k in VerifyKernel)}")
    if chosen != "triton":
        if kernel is not None and kernel != VerifyKernel.FLASHINFER.value:
            raise ModelInputError(
                f"--verify-kernel {kernel}: the {chosen} backend verifies with its own kernel (read once per pass); "
                "the serial and split-KV kernels are Triton's (--attention-backend triton)"
            )
        return EngineChoice(Engine.SGLANG, chosen, VerifyKernel.FLASHINFER, kv, f"{said}; {kv_said}")
    if kernel == VerifyKernel.FLASHINFER.value:
        raise ModelInputError("--verify-kernel flashinfer: give --attention-backend flashinfer")
    verify = VerifyKernel(kernel) if kernel else VerifyKernel.SERIAL
    return EngineChoice(Engine.SGLANG, "triton", verify, kv, f"{said}; {kv_said}")


def choice_for(
    engine: str,
    backend: str | None,
    kernel: str | None,
    kv_dtype: str | None,
    config: dict,
    gpu_key: str,
    matrix_kv: str | None,
) -> EngineChoice:
    """:func:`engine_choice` for a model's ``config.json`` object (MLA where it has a KV latent) on GPU ``gpu_key``
    (its architecture from the GPU table)."""
    sheet = GPU_TABLE.get(gpu_key)
    mla = bool(config.get("text_config", config).get("kv_lora_rank"))
    return engine_choice(
        engine, backend, kernel, kv_dtype, mla=mla, arch=sheet.arch if sheet else "", matrix_kv=matrix_kv
    )


def verify_growth(
    choice: EngineChoice,
    shape: AttentionShape,
    layers: int,
    gpu: Gpu,
    sms: int,
    anchor: float,
    serial: SerialRate | None,
    splitkv: Span | None,
) -> VerifyGrowth | None:
    """What the chosen kernel's verify adds to a cycle between the matrix's anchor context and ``context`` at
    ``streams`` streams (ms, over every layer); None for vLLM (the matrix's own). A kernel with no stored
    measurement to price it from is refused in one line."""
    kernel = choice.kernel
    if kernel is None:
        return None
    if kernel is VerifyKernel.SERIAL and serial is None:
        raise ModelInputError("--verify-kernel serial: no stored engine run measured the serial kernel's growth")
    if kernel is VerifyKernel.SPLIT_KV and splitkv is None:
        raise ModelInputError("--verify-kernel split-kv: no stored engine run measured the split-KV kernel")

    def growth(context: float, streams: int) -> Span:
        if kernel is VerifyKernel.SPLIT_KV:
            assert splitkv is not None
            per = (context - anchor) / 1000 * streams * layers
            return Span(splitkv.low * per, splitkv.high * per)
        at = verify_layer_ms(kernel, shape, context, streams, gpu, sms, serial)
        base = verify_layer_ms(kernel, shape, anchor, streams, gpu, sms, serial)
        return Span(max(at.low - base.low, 0.0) * layers, max(at.high - base.high, 0.0) * layers)

    return growth


def growth_source(choice: EngineChoice, serial: SerialRate | None, splitkv_source: str | None) -> str:
    """Where the verify's growth comes from, in words."""
    if choice.kernel is VerifyKernel.SERIAL and serial is not None:
        return (
            f"SGLang's serial extend verify: {serial.source}; scaled by the target's layers and its heads per GPU, "
            "run as measured on SM90 (SM120's smaller shared memory per block is not priced)"
        )
    if choice.kernel is VerifyKernel.SPLIT_KV and splitkv_source:
        return f"Triton's split-KV verify, {splitkv_source}"
    if choice.kernel is VerifyKernel.FLASHINFER:
        return "a verify reading each stream's KV once per pass at the GPU's bandwidth, plus a launch per layer"
    return "the matrix's own verify"


def engine_verify(
    runs: StoredRuns, choice: EngineChoice, config: dict, tp: int, layers: int, gpu: Gpu, gpu_key: str, anchor: float
) -> tuple[VerifyGrowth | None, str]:
    """The chosen engine's verify growth over a matrix anchored at ``anchor`` tokens for ``config`` (a config.json's
    object) at TP ``tp`` on ``gpu``, from the record's engine runs, and its source in words."""
    serial = serial_rate(runs.engine) if choice.kernel is VerifyKernel.SERIAL else None  # only the kernel chosen
    split = splitkv_rate(runs.engine) if choice.kernel is VerifyKernel.SPLIT_KV else None
    sheet = GPU_TABLE.get(gpu_key)
    growth = verify_growth(
        choice,
        attention_shape(config, tp, choice.kv_dtype),
        layers,
        gpu,
        sheet.sms if sheet else 0,
        anchor,
        serial[0] if serial else None,
        split[0] if split else None,
    )
    return growth, growth_source(choice, serial[0] if serial else None, split[1] if split else None)


@dataclass(frozen=True)
class EngineBands:
    """How a public matrix's bands are re-priced for an engine: its verify's growth (None: the matrix's own), the
    pool capping distinct streams (None: not capped) and the relative error each crossover band is widened by."""

    label: str
    verify: VerifyGrowth | None
    pool: PoolCap | None
    widen: float


def engine_bands(
    ev: ModelSources, choice: EngineChoice, config: dict, target: ModelCosts, gpu_key: str, tp: int, regime: str
) -> EngineBands | None:
    """The re-pricing of the public matrix that ran this box (None: none did) for ``choice``: its verify from the
    stored engine runs, the page's own pool (its KV dtype; else the pool the book's memory fraction leaves) and the
    leave-one-matrix-out error of the crossovers."""
    stored = stored_inputs(ev)
    matched = matching_matrix(stored, target, gpu_key, tp, regime, Drafter.EAGLE3, 4)
    if matched is None:
        return None
    matrix, _ = matched
    gpu = gpu_named(gpu_key, stored.runs.ceilings)
    growth, _source = engine_verify(stored.runs, choice, config, tp, target.layers, gpu, gpu_key, float(matrix.anchor))
    pool = matrix_pool(matrix, choice, target, eagle3_draft_for(target), gpu, tp)
    return EngineBands(choice.words(), growth, pool, holdout_miss(stored))


def matrix_pool(
    matrix: ContextMatrix,
    choice: EngineChoice,
    target: ModelCosts,
    draft: ModelCosts | None,
    gpu: Gpu,
    tp: int,
    mem_fraction: float | None = None,
) -> PoolCap:
    """The KV pool that caps distinct streams in a matrix's transfer, one rule for the decision page, ``model
    speculation`` and ``box --plan``: the page's own (with speculation) where no memory fraction is named and the
    engine runs the page's KV dtype; else priced from the GPU's memory, the weights per GPU (target and ``draft``),
    ``mem_fraction`` (default: the book's) and the KV dtype (weights that do not fit are refused)."""
    if mem_fraction is None and choice.kv_dtype == matrix.kv_dtype and matrix.spec_pool_tokens:
        return PoolCap(
            matrix.spec_pool_tokens, f"the page's own pool with speculation, KV {matrix.kv_dtype}; {matrix.source}"
        )
    fraction = mem_fraction if mem_fraction is not None else DEFAULT_MEM_FRACTION
    tokens = kv_pool_tokens(target, draft, gpu, tp, fraction, kv_bytes=KV_DTYPE_BYTES[choice.kv_dtype])
    return PoolCap(
        tokens,
        f"priced: {fraction:g} of each GPU's memory less the weights per GPU"
        + (" (the draft's included)" if draft is not None else "")
        + f", KV {choice.kv_dtype}",
    )
