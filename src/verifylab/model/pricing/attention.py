"""Two terms of a pass that grow with context: the attention over each stream's KV and the KV pool that holds it.

Attention is priced from the bytes of one stream's context (its KV over every layer the GPU holds) at the scenario's
bandwidth, times what an engine is seen to spend on them: a share per pass, a share per stream, and how often a
multi-token query reads them — once per pass (the bytes themselves, the pricer's first rule) or once per query token
(what a verify costs where the engine treats each verified token as its own decode query). Where the shares come
from a measured or public matrix the terms name it. The pool is what the memory fraction leaves once the weights
(target and draft) are placed, in tokens of every model's KV; a stream beyond it waits for one that finishes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from verifylab.errors import ModelInputError
from verifylab.model.inputs.gpus import Gpu
from verifylab.model.inputs.model_costs import ModelCosts

PER = 1000.0  # the shares are per 1,000 tokens of context
DEFAULT_MEM_FRACTION = 0.90  # SGLang's static memory fraction as the book prices it (chapter 4's lower setting)


@dataclass(frozen=True)
class AttentionTerms:
    """What attention over context costs, in units of reading one stream's context once (its bytes at the
    bandwidth): ``per_pass`` once per pass, ``per_stream`` per stream, read once per ``pass`` or once per query
    ``token``; ``source`` says where the shares come from."""

    per_pass: float
    per_stream: float
    reads: Literal["pass", "token"]
    source: str

    def words(self) -> str:
        reads = "once per pass" if self.reads == "pass" else "once per query token (a verify: per verified token)"
        shares = f"{self.per_stream:.2f} x a stream's KV bytes per stream and {self.per_pass:.2f} per pass"
        return f"{shares}, {reads} ({self.source})"


BYTES_ONCE_PER_PASS = AttentionTerms(0.0, 1.0, "pass", "each stream's KV bytes read once per pass")


def stream_context_bytes(model: ModelCosts, context: float, tp: int) -> float:
    """The KV of one stream's ``context`` tokens that one GPU of ``tp`` holds (MLA's latent is whole on every GPU)."""
    return context * model.kv_bytes_per_token_layer * model.layers / (tp if model.kv_sharded else 1)


DECODE_QUERY_MAX = 16  # query tokens per stream a decode kernel takes one at a time; a longer query is a prefill


def stream_reads(terms: AttentionTerms, tokens: float, streams: float) -> float:
    """How many times one stream's context a pass of ``tokens`` tokens from ``streams`` streams costs (the pricer
    turns it into time at the scenario's bandwidth). A prefill's query (more than :data:`DECODE_QUERY_MAX` tokens per
    stream) reads it once: its attention is arithmetic, which the pricer prices as such."""
    query = tokens / max(streams, 1.0)
    reads = query if terms.reads == "token" and query <= DECODE_QUERY_MAX else 1.0
    return terms.per_pass + terms.per_stream * streams * reads


def kv_pool_tokens(
    target: ModelCosts,
    draft: ModelCosts | None,
    gpu: Gpu,
    tp: int,
    mem_fraction: float,
    workspace_bytes: float = 0.0,
    kv_bytes: float = 2.0,
    stages: int = 1,
) -> int:
    """Tokens of context the KV pool holds on each GPU once the weights of the target (and the draft) and a
    collective's workspace are placed in ``mem_fraction`` of its memory, the KV in ``kv_bytes`` bytes an element (2:
    bf16, 1: fp8; a token costs its KV in every model). ``stages`` pipeline stages each hold their share of the
    target's layers (weights and KV); the draft runs whole on the last. Weights that do not fit are refused, naming
    the shortfall."""
    weights = target.weights_bytes(tp) / stages + (draft.weights_bytes(tp) if draft else 0.0)
    budget = mem_fraction * gpu.memory_bytes
    room = budget - weights - workspace_bytes
    if room <= 0:
        raise ModelInputError(
            f"{target.name} does not fit {gpu.name} at TP {tp}"
            + (f" x PP {stages}" if stages > 1 else "")
            + f": {weights / 1e9:.1f} GB of weights per GPU"
            + (" (the draft's included)" if draft else "")
            + (f" and {workspace_bytes / 1e9:.2f} GB of collective workspace" if workspace_bytes else "")
            + f" against {mem_fraction:g} x {gpu.memory_bytes / 1e9:.1f} GB = {budget / 1e9:.1f} GB: short by "
            f"{-room / 1e9:.1f} GB (raise --tp or --mem-fraction)"
        )
    scale = kv_bytes / 2.0  # the models price their KV in bf16
    draft_kv = stream_context_bytes(draft, 1.0, tp) if draft else 0.0
    per_token = scale * (stream_context_bytes(target, 1.0, tp) / stages + draft_kv)
    return math.floor(room / per_token) if per_token > 0 else 0


def streams_held(pool_tokens: int, context: float) -> int:
    """Distinct streams of ``context`` tokens the pool holds at once (0: not even one fits)."""
    return math.floor(pool_tokens / max(context, 1.0))
