"""Facts shared across verifylab: one way to compare package versions, the Kimi-K2 sizes an all-reduce moves."""

from __future__ import annotations

from enum import StrEnum

from packaging.version import InvalidVersion, Version

from verifylab.errors import ParameterError


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


# The SGLang/FlashInfer pairs a launch command is built for (audited wheels): the first published pair with both
# FlashInfer's SM12x fused all-reduce build and SGLang's PCIe-IPC all-reduce; and the case study's own stack
RECOMMENDED_STACK = ("0.5.22", "0.7.1")
CASE_STUDY_STACK = ("0.5.9", "0.6.4")
PCIE_IPC_SGLANG = "0.5.21"  # device_communicators/pcie_ipc_ar.py first ships (read from the wheels)
PCIE_IPC_FLASHINFER = "0.7.0"  # flashinfer.comm.PcieIpcAllReduceWorkspace; older builds fall back to NCCL

KIMI_K2_HIDDEN = 7168  # Kimi-K2 / DeepSeek-V3 hidden size: one all-reduce of k tokens moves k x 7168 values
KIMI_K2_ALLREDUCES_PER_PASS = 122  # 61 layers x (after attention + after the MoE)
BF16_BYTES = 2

# A verify pass carries streams x draft tokens: SGLang's common EAGLE-3 settings span 4-8 draft tokens (not
# reported by the case study), and the book prices every option at 1, 8 and 32 concurrent streams
DRAFT_TOKENS = (4, 8)
COMMAND_DRAFT_TOKENS = DRAFT_TOKENS[0]  # the chain the launch commands run: the public evidence's, the shortest here
LOAD_STREAMS = (1, 8, 32)


def allreduce_message_bytes(tokens: float, hidden: int = KIMI_K2_HIDDEN, itemsize: int = BF16_BYTES) -> float:
    """Bytes of one TP all-reduce of ``tokens`` hidden states."""
    return tokens * hidden * itemsize


# FlashInfer facts read from its published wheels (data/gates/fusion_forensics.csv): the fusion workspace SGLang
# creates is CUDA IPC buffers up to 0.6.4 (legacy API) and symmetric device memory without multicast in 0.6.7;
# 0.6.11-0.6.12 allocate it with NVLink multicast; from 0.6.15 without again. The fusion module's JIT list admits
# SM12x from 0.6.17 (0.6.18 is the first version an audited SGLang pins with it).
FLASHINFER_MULTICAST_WORKSPACE = ("0.6.11", "0.6.15")  # [first, first after) needing NVLink multicast
FLASHINFER_JIT_ADMITS_SM12X = "0.6.17"


def flashinfer_workspace_needs_multicast(version: str | None) -> bool:
    """Whether this FlashInfer allocates the TRT-LLM fusion workspace with NVLink multicast (audited wheels)."""
    first, after = FLASHINFER_MULTICAST_WORKSPACE
    return version_at_least(version, first) and not version_at_least(version, after)


# SGLang's fusion handles at most this many tokens per forward (layernorm.py: max_token_num=max(x.shape[0], 2048);
# FUSE_ALLREDUCE_MAX_BATCH_SIZE); larger passes fall back to the unfused all-reduce
SGLANG_FUSION_MAX_TOKENS = 2048


class Regime(StrEnum):
    """The communication regime of a multi-GPU box: what an all-reduce costs there is decided by it."""

    HEALTHY_P2P = "healthy P2P"
    HOST_MEMORY = "host-memory fallback"
    SOCKET = "socket"
    DEGRADED = "degraded"  # P2P reported but staged or broken: the platform is the fix
    NCCL_SLOW = "NCCL slow, P2P works"  # P2P healthy pair by pair, NCCL's all-reduce slow: a collective is the fix
    NOT_APPLICABLE = "not applicable"
    UNKNOWN = "unknown"  # the probe lacks what a verdict needs (NCCL logged no channel lines, nothing measured)
    MEASURED = "this box (probe)"  # not a verdict: the pricing source when a probe of the box itself is stored


P2P_WORKS = frozenset({Regime.HEALTHY_P2P, Regime.NCCL_SLOW})  # what writes into the peers' memory runs in these


REGIME_KEYS = {  # the command line's spelling of each regime (either spelling is accepted, the value is printed)
    "healthy-p2p": "healthy P2P",
    "host-memory": "host-memory fallback",
    "degraded": "degraded",
    "nccl-slow": "NCCL slow, P2P works",
}


def regime_named(text: str, option: str = "--regime") -> Regime:
    """A regime from either spelling (``healthy-p2p`` or ``healthy P2P``); one line naming the choices otherwise."""
    value = REGIME_KEYS.get(text.strip().lower(), text.strip())
    try:
        return Regime(value)
    except ValueError:
        choices = ", ".join(f"{k} ('{v}')" for k, v in REGIME_KEYS.items())
        raise ValueError(f"{option} {text!r}: one of {choices}") from None


class Drafter(StrEnum):
    """Where speculative decoding's draft tokens come from: a draft model (EAGLE-3) or the context's n-grams."""

    EAGLE3 = "eagle3"
    NGRAM = "ngram"

    @property
    def algorithm(self) -> str:
        """SGLang's ``--speculative-algorithm`` value."""
        return {Drafter.EAGLE3: "EAGLE3", Drafter.NGRAM: "NGRAM"}[self]

    @property
    def prose_name(self) -> str:
        """The drafter's name in prose: ``EAGLE-3``, ``n-gram``."""
        return {Drafter.EAGLE3: "EAGLE-3", Drafter.NGRAM: "n-gram"}[self]


SPECULATION_POINTS_TABLE = "speculation_points"  # a speculation grid's table: one row per server (store/schema)
BOX_VERIFY_POINTS_TABLE = "box_verify_points"  # a `verifylab box --verify` run's: one row per server it started

RUN_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{2,95}$"  # a run's name: a plain folder name, never a path
RESERVED_RUN_IDS = frozenset({"index", "genindex", "search"})  # the run pages' own index and the book's pages


def plain_run_id(run_id: str) -> str:
    """``run_id`` when it is a plain run name; :class:`~verifylab.errors.ParameterError` naming it otherwise."""
    import re

    if not re.fullmatch(RUN_ID_PATTERN, str(run_id)):
        raise ParameterError(f"run id {run_id!r} is not a plain run name ({RUN_ID_PATTERN}: lower case, digits, . _ -)")
    if str(run_id) in RESERVED_RUN_IDS:
        raise ParameterError(f"run id {run_id!r} is the name of a page of the book: choose another")
    return run_id


COMM_CAMPAIGN_TABLES = ("allreduce_latency", "verify_pass")  # the tables of one communication campaign run


def streams_words(count: int) -> str:
    """``1 stream``, ``8 streams``."""
    return f"{count} stream{'' if count == 1 else 's'}"
