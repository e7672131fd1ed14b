"""Facts shared across verifylab: one way to compare package versions, the Kimi-K2 sizes an all-reduce moves."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version


def version_at_least(version: str | None, minimum: str) -> bool:
    """Whether ``version`` (PEP 440: ``0.6.17rc1`` is *before* ``0.6.17``) is at least ``minimum``; an absent or
    unparsable version is not."""
    if not version:
        return False
    try:
        return Version(version) >= Version(minimum)
    except InvalidVersion:
        return False


def version_key(version: str) -> Version | tuple:
    """A sort key for package versions (unparsable ones sort first)."""
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)


KIMI_K2_HIDDEN = 7168  # Kimi-K2 / DeepSeek-V3 hidden size: one all-reduce of k tokens moves k x 7168 values
KIMI_K2_ALLREDUCES_PER_PASS = 122  # 61 layers x (after attention + after the MoE)
BF16_BYTES = 2

# A verify pass carries streams x draft tokens: SGLang's common EAGLE-3 settings span 4-8 draft tokens (not
# reported by the case study), and the book prices every option at 1, 8 and 32 concurrent streams
DRAFT_TOKENS = (4, 8)
LOAD_STREAMS = (1, 8, 32)


def allreduce_message_bytes(tokens: float, hidden: int = KIMI_K2_HIDDEN, itemsize: int = BF16_BYTES) -> float:
    """Bytes of one TP all-reduce of ``tokens`` hidden states."""
    return tokens * hidden * itemsize


# FlashInfer facts from its source: its TRT-LLM all-reduce workspace allocates without multicast from 0.6.15
# (trtllm_ar.py: SymmDeviceMemory(enable_multicast=False)); its fusion module's JIT list admits SM12x from 0.6.17
FLASHINFER_WORKSPACE_WITHOUT_MULTICAST = "0.6.15"
FLASHINFER_JIT_ADMITS_SM12X = "0.6.17"

# SGLang's fusion handles at most this many tokens per forward (layernorm.py: max_token_num=max(x.shape[0], 2048);
# FUSE_ALLREDUCE_MAX_BATCH_SIZE); larger passes fall back to the unfused all-reduce
SGLANG_FUSION_MAX_TOKENS = 2048
