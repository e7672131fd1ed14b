"""A speculation answer from the nearest evidence when a public per-context matrix ran the owner's box: the same GPU,
count and model shape, the same collective regime, drafter and chain. The answer is that matrix's own anchor row
transferred to the owner's context and accept length by the context terms fitted on it
(:mod:`verifylab.model.fits.context`): measured figures moved by a fitted term, not the cost model's physics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from verifylab.errors import ModelInputError
from verifylab.model.answers.box_plan import Configuration, RateSource
from verifylab.model.fits.context import (
    AttentionFit,
    VerifyGrowth,
    context_fits,
    context_terms,
    crossover_band,
    transferred,
)
from verifylab.model.inputs.context_matrix import ContextMatrix, context_matrices
from verifylab.model.inputs.known_models import known_model
from verifylab.model.inputs.model_costs import ModelCosts
from verifylab.model.inputs.stored import StoredInputs, stored_inputs
from verifylab.model.pricing.attention import AttentionTerms, streams_held
from verifylab.model.pricing.speculation import SpeculationAnswer
from verifylab.sources import ModelSources
from verifylab.span import Span
from verifylab.vocab import Drafter

REGIME_OF = {"healthy P2P": "healthy-p2p"}  # a matrix's interconnect as the command line names the regime


def same_shape(a: ModelCosts, b: ModelCosts) -> bool:
    """Whether two models cost the same per pass: every priced field equal, the name aside."""
    left, right = asdict(a), asdict(b)
    return all(left[k] == right[k] for k in left if k not in ("name", "quantization"))


def matching_matrix(
    stored: StoredInputs,
    target: ModelCosts,
    gpu: str,
    tp: int,
    regime: str | None,
    drafter: Drafter,
    draft_tokens: int,
) -> tuple[ContextMatrix, AttentionFit] | None:
    """The stored matrix that ran this box (GPU key, count, model shape, regime, drafter, chain), with its fit."""
    fits = context_fits(stored)
    for matrix in context_matrices(stored.public_context):
        if (
            matrix.name in fits
            and matrix.gpu == gpu
            and matrix.gpus == tp
            and REGIME_OF.get(matrix.interconnect) == regime
            and drafter is Drafter.EAGLE3
            and matrix.verify_tokens == draft_tokens
            and same_shape(target, known_model(matrix.config))
        ):
            return matrix, fits[matrix.name]
    return None


@dataclass(frozen=True)
class PoolCap:
    """The KV pool that caps distinct streams at a context: its tokens and where they come from."""

    tokens: int
    source: str

    def streams(self, context: float) -> int:
        return streams_held(self.tokens, context)


def anchored_answer(
    matrix: ContextMatrix,
    fit: AttentionFit,
    context: float,
    accept: float | None,
    streams: list[int],
    verify: VerifyGrowth | None = None,
    engine: tuple[str, str] | None = None,
    pool: PoolCap | None = None,
) -> SpeculationAnswer:
    """The matrix's anchor row at ``context`` and ``accept`` (None: the page's own): every stream count the row spans
    that the KV ``pool`` holds as distinct sessions, the crossover where speculation stops paying for good (a band
    over the fit's, the page's accept length's and the verify's ends), the inputs. ``verify`` and ``engine`` (its
    words and its growth's source): another engine's verify in place of the page's (:mod:`.engine_answer`)."""
    cap = pool.streams(context) if pool is not None else None
    if cap == 0:
        assert pool is not None
        raise ModelInputError(
            f"--context {context:g}: not one stream of it fits the KV pool ({pool.tokens:,} tokens: {pool.source})"
        )
    within = [s for s in streams if cap is None or s <= cap]
    if cap is not None and streams and cap < max(streams) and cap not in within:
        within.append(cap)  # the pool's own limit is a stream count the answer prices
    rows = transferred(matrix, fit, context, within, accept, verify)
    crossover = crossover_band(matrix, fit, context, [r.streams for r in rows], accept, verify)
    inputs: dict[str, Any] = {
        "evidence": f"public, the same GPUs and model family: {matrix.model} on {matrix.gpus} x {matrix.gpu} "
        f"({matrix.interconnect}), {matrix.engine}, attention {matrix.attention}, KV {matrix.kv_dtype}; "
        f"{matrix.source}",
        "transfer": f"the matrix's {matrix.labels[matrix.anchor]}-context row moved to {context:g} tokens by "
        f"{fit.per_pass * 1e3:.1f} µs per pass and {fit.per_stream * 1e3:.1f} µs per stream per 1,000 tokens "
        f"(fitted on {len(fit.fit_cells)} plain cells of {matrix.name}; leave-one-out "
        f"{fit.per_stream_band.low * 1e3:.1f}-{fit.per_stream_band.high * 1e3:.1f} µs), a verify reading each "
        f"stream's context {fit.reads_per_cycle:.2f} times (once per verified token and the draft's passes)",
        "accept_length": (f"{accept:g} yours; " if accept is not None else "the page's own, ")
        + f"{matrix.accept.text(2)} sets its cycle time ({matrix.accept_note})",
        "context_tokens": f"{context:g}",
        "kv_pool": f"the page states {matrix.spec_pool_tokens or 'no'} tokens with speculation and "
        f"{matrix.plain_pool_tokens or 'no'} without; its prompts share one prefix, so no cell queued on it",
        "streams": f"{min(r.streams for r in rows)}-{max(r.streams for r in rows)} (the matrix's range)"
        if rows
        else "none",
    }
    if engine is not None:
        inputs["engine"], inputs["verify"] = engine
    if pool is not None and cap is not None:
        dropped = [s for s in streams if s > cap]
        inputs["kv_cap"] = (
            f"{cap} distinct streams of {context:,.0f} tokens ({pool.tokens:,} tokens: {pool.source})"
            + (f"; {', '.join(map(str, dropped))} streams would queue, not shown" if dropped else "")
        )
    return SpeculationAnswer(rows, crossover, inputs, cap)


def transfer_rates(
    matrix: ContextMatrix,
    fit: AttentionFit,
    context: float,
    own_accept: bool = False,
    verify: VerifyGrowth | None = None,
) -> RateSource:
    """A plan's rates from the matrix moved to ``context``: plain decoding, and EAGLE-3 at the matrix's chain with
    the configuration's accept length (``own_accept``: the page's own, a range; other chains have no evidence here
    and are not offered)."""

    def rates(config: Configuration, running: Sequence[int]) -> dict[int, Span]:
        if config.drafter is not None and config.draft_tokens != matrix.verify_tokens:
            raise ModelInputError(f"{config.words()}: {matrix.name} measured {matrix.verify_tokens} tokens per verify")
        accept = None if config.drafter is None or own_accept else config.accept
        rows = transferred(matrix, fit, context, list(running), accept, verify)
        beyond = sorted(set(running) - {r.streams for r in rows})
        if beyond:
            raise ModelInputError(
                f"{config.words()}: no rate at {', '.join(map(str, beyond))} running: {matrix.name} ran "
                f"{matrix.streams[0]} to {matrix.streams[-1]} streams; give a --load within them"
            )
        return {r.streams: r.plain_tokens_per_s if config.drafter is None else r.spec_tokens_per_s for r in rows}

    return rates


def evidence_context_terms(ev: ModelSources) -> AttentionTerms:
    """What context costs on any box, fitted once per evidence on its public per-context matrix (where the
    evidence holds none, the bytes once per pass): the terms ``box --plan`` and ``box`` price attention with."""
    return context_terms(stored_inputs(ev))
