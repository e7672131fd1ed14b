"""A verify pass's attention priced as the kernel that runs it, per layer on one GPU.

- ``serial`` (SGLang's Triton ``extend_attention_fwd``, what every audited SGLang runs for an MLA model on SM120 by
  default): one program per (stream, query head) walks the stream's whole prefix, so a layer takes one program's loop
  over the context (a rate per 1,000 tokens and per element of the key and value rows, fitted on a measured run), in as
  many waves as the streams x heads per GPU need beyond what the GPU runs at once.
- ``split-kv`` (Triton's ``verify_splitkv``, switched on for AMD gfx95 only: on NVIDIA it needs a patched SGLang) and
  ``flashinfer`` (FlashInfer's paged prefill or MLA kernel): each stream's KV read once per pass at the GPU's bandwidth,
  plus a fixed cost per layer for the launch (and split-KV's merge), unmeasured until a run stores it.

The shapes come from a model's config and the TP: an MLA layer holds one latent row per token (``kv_lora_rank`` +
``qk_rope_head_dim`` elements) whole on every GPU, its query heads split by TP; a dense layer its KV heads split."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from verifylab.errors import ModelInputError
from verifylab.model.inputs.gpus import Gpu
from verifylab.span import Span

PER = 1000.0  # rates are per 1,000 tokens of context
KV_DTYPE_BYTES = {"bf16": 2.0, "fp16": 2.0, "auto": 2.0, "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0}
# Per layer, the launch of a kernel that reads the KV once (and split-KV's merge): not measured yet, a range.
ONCE_FIXED_MS = {"split-kv": Span(0.004, 0.02), "flashinfer": Span(0.003, 0.015)}


class VerifyKernel(StrEnum):
    """The kernel that runs a verify pass's attention."""

    SERIAL = "serial"
    SPLIT_KV = "split-kv"
    FLASHINFER = "flashinfer"


@dataclass(frozen=True)
class AttentionShape:
    """One attention layer as one GPU of a TP group holds it."""

    mla: bool
    q_heads: int  # query heads on one GPU
    kv_heads: int  # KV heads on one GPU (MLA: one latent row)
    qk_dim: int  # elements of a key row a query reads
    v_dim: int  # elements of a value row
    kv_bytes_per_token: float  # one token's KV in this layer on one GPU

    @property
    def row_elements(self) -> int:
        """What one program reads of each context token: its key and value rows (MLA: the value is the latent)."""
        return self.qk_dim + self.v_dim


def attention_shape(config: dict, tp: int, kv_dtype: str = "bf16") -> AttentionShape:
    """The attention layer of ``config`` (a Hugging Face ``config.json``, or its ``text_config``) on one GPU of TP
    ``tp``, its KV in ``kv_dtype``; one line naming the field that is missing or the dtype that is unknown."""
    config = config.get("text_config", config)
    if kv_dtype not in KV_DTYPE_BYTES:
        raise ModelInputError(f"--kv-cache-dtype {kv_dtype!r}: choose {', '.join(sorted(KV_DTYPE_BYTES))}")
    width = KV_DTYPE_BYTES[kv_dtype]
    try:
        heads = int(config["num_attention_heads"])
        if config.get("kv_lora_rank"):
            latent, rope = int(config["kv_lora_rank"]), int(config["qk_rope_head_dim"])
            return AttentionShape(True, max(heads // tp, 1), 1, latent + rope, latent, (latent + rope) * width)
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
        kv_heads = max(int(config.get("num_key_value_heads", heads)) // tp, 1)
    except KeyError as missing:
        raise ModelInputError(f"config.json: no {missing.args[0]!r}: cannot shape its attention") from None
    return AttentionShape(False, max(heads // tp, 1), kv_heads, head_dim, head_dim, 2 * kv_heads * head_dim * width)


@dataclass(frozen=True)
class SerialRate:
    """The serial extend kernel's loop: ms per 1,000 tokens of one stream's context per element of a token's key and
    value rows (one program), plus a cost per 1,000 tokens whatever the row's width (``ms_per_1k_fixed``), how many
    programs one SM runs at once, the GPU it was measured on and the cells."""

    ms_per_1k_per_element: Span
    programs_per_sm: float
    measured_on: str
    source: str
    ms_per_1k_fixed: float = 0.0

    def ms_per_1k(self, shape: AttentionShape) -> Span:
        """One program's loop over 1,000 tokens of ``shape``'s rows (ms)."""
        r = self.ms_per_1k_per_element
        return Span(
            self.ms_per_1k_fixed + r.low * shape.row_elements, self.ms_per_1k_fixed + r.high * shape.row_elements
        )


def waves(programs: float, sms: int, per_sm: float) -> float:
    """How many times over the GPU runs ``programs`` programs (1 while they all run at once)."""
    return max(1.0, programs / (sms * per_sm)) if sms > 0 else 1.0


def verify_layer_ms(
    kernel: VerifyKernel,
    shape: AttentionShape,
    context: float,
    streams: int,
    gpu: Gpu,
    sms: int,
    serial: SerialRate | None = None,
) -> Span:
    """One layer's verify attention on one GPU (ms): ``streams`` streams of ``context`` tokens of prefix each."""
    if kernel is VerifyKernel.SERIAL:
        if serial is None:
            raise ModelInputError("the serial verify kernel is priced from a measured rate: none is stored")
        loop = serial.ms_per_1k(shape)
        scale = context / PER * waves(streams * shape.q_heads, sms, serial.programs_per_sm)
        return Span(loop.low * scale, loop.high * scale)
    read = context * streams * shape.kv_bytes_per_token  # each stream's KV once per pass
    fixed = ONCE_FIXED_MS[kernel.value]
    return Span(read / (gpu.bandwidth_gbs.high * 1e6) + fixed.low, read / (gpu.bandwidth_gbs.low * 1e6) + fixed.high)
