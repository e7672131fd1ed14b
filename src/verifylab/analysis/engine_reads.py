"""What SGLang really reads, as chapter 4 shows it: the finding in words, attention's growth with context per backend
(measured beside the model's prediction) and the experts a verify pass reads (measured beside the model's overlaps),
from :mod:`verifylab.model.fits.engine_reads`."""

from __future__ import annotations

import math

import pandas as pd

from verifylab.model.views import attention_growth, context_cells, expert_reads, gpu_title, stored_runs
from verifylab.report.tables import Table, cell_text, header
from verifylab.sources import MeasuredRuns

TARGETS = {"dense": "dense (GQA, 4 layers)", "mla": "MLA (12 layers)", "mla36": "MLA (36 layers)"}
MEASURED = "measured (run); modelled (the prediction committed before the run)"
NOT_RESOLVED = "host-bound"  # the step did not grow enough with context for attention's share to show


def _k(tokens: int) -> str:
    return f"{tokens // 1024}k"


def _streams(n: int) -> str:
    return f"{n} stream" if n == 1 else f"{n} streams"


def _growth(value: float, resolved: object) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value if bool(resolved) else NOT_RESOLVED


def attention_view(runs: MeasuredRuns) -> pd.DataFrame:
    """One row per target, backend and streams: how much 1,000 tokens of a stream's context add to a plain step and
    to a verify cycle (µs, measured), per verified token, the cycle over the step, and the model's growth."""
    growth = attention_growth(stored_runs(runs))
    if growth.empty:
        return pd.DataFrame()
    rows = []
    for r in growth.to_dict("records"):
        cycle = r.get("cycle_us_per_1k")
        spec = cycle is not None and not math.isnan(cycle)
        mode = "eagle3" if spec else "plain"
        predicted = r.get(f"predicted_{mode}_once_per_pass_us_per_1k")
        measured = cycle if spec else (r.get("plain_us_per_1k") if r.get("plain_resolved") else None)
        rows.append(
            {
                "target": TARGETS.get(r["shape"], r["shape"]),
                "GPU": gpu_title(r["gpu"]),
                "backend": r["backend"],
                "streams": r["streams"],
                "contexts": f"{_k(r['context_low'])} to {_k(r['context_high'])}",
                "plain_step_us": _growth(r.get("plain_us_per_1k"), r.get("plain_resolved")),
                "verify_cycle_us": cycle if spec else None,
                "per_verified_token_us": r.get("cycle_per_verified_token_us_per_1k") if spec else None,
                "cycle_over_plain": r.get("cycle_over_plain"),
                "model_once_per_pass_us": predicted,
                "model_once_per_token_us": r.get(f"predicted_{mode}_once_per_token_us_per_1k"),
                "measured_over_model": measured / predicted if measured is not None and predicted else None,
                "run": r["runs"],
                "provenance": MEASURED,
            }
        )
    return pd.DataFrame(rows)


def experts_view(runs: MeasuredRuns) -> pd.DataFrame:
    """One row per stream count: the experts a verify read (measured), independent and chain-shared tokens' (measured
    by plain decoding), their ratio, the overlap it equals, and the model's predictions at overlaps 0, 1 and fitted."""
    reads = expert_reads(stored_runs(runs))
    if reads.empty:
        return pd.DataFrame()
    return pd.DataFrame(
        {
            "streams": reads["streams"],
            "ids_per_verify": reads["ids_per_verify"].round(1),
            "verify_reads": reads["verify_experts"].round(1),
            "reached_by_its_ids": reads["expected_from_ids"].round(1),
            "independent_tokens_read": reads["independent_experts"].round(1),
            "one_draw_per_chain_reads": reads["shared_experts"].round(1),
            "verify_over_independent": reads["verify_over_independent"].round(3),
            "equivalent_overlap": reads["equivalent_overlap"].round(2),
            "model_overlap_0": reads["predicted_overlap_0"].round(1),
            "model_overlap_1": reads["predicted_overlap_1"].round(1),
            "model_fitted_overlap": [
                f"{low:.1f} to {high:.1f}" if low != high else f"{low:.1f}"
                for low, high in zip(reads["predicted_fitted_high"], reads["predicted_fitted_low"], strict=True)
            ],
            "run": reads["run"],
            "provenance": MEASURED,
        }
    )


def _shown(view: pd.DataFrame, row: int, column: str) -> str:
    """A cell as the table shows it: the prose quotes the very text of the exhibit."""
    return str(Table(view).cells()[header(column)].iloc[row])


FIRST_GPU = "h200"


def deep_target_words(view: pd.DataFrame, growth: pd.DataFrame) -> list[str]:
    """The minimum grid's sentence (one stream, MLA targets of two depths, Triton's serial verify against FlashInfer's),
    every number a cell of :func:`attention_view`; none where those cells are not stored."""
    spec = growth["cycle_us_per_1k"].notna() if "cycle_us_per_1k" in growth else growth["streams"] < 0
    deep = growth[spec & (growth["gpu"] != FIRST_GPU) & growth["shape"].str.startswith("mla")]
    pairs = {(r.shape, r.backend): i for i, r in zip(deep.index, deep.itertuples(), strict=True)}
    shapes = sorted({s for s, _ in pairs}, key=lambda s: TARGETS.get(s, s))
    if not all((s, b) in pairs for s in shapes for b in ("triton", "flashinfer")) or not shapes:
        return []
    gpu = view["GPU"].iloc[pairs[(shapes[0], "triton")]]
    each = "; ".join(
        f"{TARGETS.get(s, s)}: {_shown(view, pairs[(s, 'triton')], 'verify_cycle_us')} µs on Triton's serial verify, "
        f"{_shown(view, pairs[(s, 'flashinfer')], 'verify_cycle_us')} µs on FlashInfer's"
        for s in shapes
    )
    return [
        f"On one {gpu} (issue #83's minimum grid: one stream, from "
        f"{_shown(view, pairs[(shapes[0], 'triton')], 'contexts')} tokens), each 1,000 tokens of context added to an "
        f"EAGLE-3 cycle: {each}. The serial kernel's growth scales with the layers; FlashInfer's stays within the "
        "host's noise: which kernel verifies decides the long-context answer."
    ]


def attention_words(runs: MeasuredRuns) -> str:
    """The finding on attention over context, every number the text of :func:`attention_view`'s cells (a ratio the
    table does not show formatted by the same rule)."""
    view = attention_view(runs)
    if view.empty:
        return "No engine-reads context run is stored: attention over context is priced, not measured."
    growth = attention_growth(stored_runs(runs))  # the same rows, in the same order, with the values behind them
    words = []
    cycles = growth["cycle_us_per_1k"].notna() if "cycle_us_per_1k" in growth else growth["streams"] < 0
    first = growth["gpu"] == FIRST_GPU  # issue #72's series; the minimum grid of #83 ran on another GPU (below)
    triton = growth.index[(growth["backend"] == "triton") & cycles & first]
    mla = [i for i in triton if growth.at[i, "shape"] == "mla"]
    dense = [i for i in triton if growth.at[i, "shape"] == "dense"]
    if mla:
        i = mla[0]
        per_token = growth.at[i, "cycle_us_per_1k"] / growth.at[i, "predicted_eagle3_once_per_token_us_per_1k"]
        words.append(
            "On SGLang 0.5.17's Triton backend a verify pass's attention is not priced by the bytes it reads. "
            f"From {_shown(view, i, 'contexts')} tokens of context, each 1,000 tokens of a stream's context added "
            f"{_shown(view, i, 'verify_cycle_us')} µs to a 12-layer MLA target's EAGLE-3 cycle at "
            f"{_streams(int(view['streams'].iloc[i]))}, {_shown(view, i, 'measured_over_model')} times the model's "
            f"prediction ({_shown(view, i, 'model_once_per_pass_us')} µs: the KV read once per pass at the H200's "
            f"measured bandwidth) and {cell_text('measured_over_model', per_token)} times even a read per verified "
            "token."
        )
        if len(mla) > 1:
            totals = ", ".join(
                f"{cell_text('verify_cycle_us', growth.at[j, 'cycle_us_per_1k'] * growth.at[j, 'streams'])} µs at "
                f"{_streams(int(growth.at[j, 'streams']))}"
                for j in mla
            )
            words.append(
                f"Summed over the streams the growth hardly moves with load ({totals}, per 1,000 tokens of each "
                "stream's context): SGLang verifies with its serial-prefix extend kernel, which walks each stream's "
                "context in one pass per head (its split-KV verify kernel is switched on for AMD's gfx95 only), so "
                "the kernel's latency, not the bandwidth, sets the verify pass."
            )
    if dense:
        i = dense[0]
        words.append(
            f"The dense target's cycle grew {_shown(view, i, 'verify_cycle_us')} µs per 1,000 tokens at "
            f"{_streams(int(view['streams'].iloc[i]))}, {_shown(view, i, 'cycle_over_plain')} times its plain "
            "step's growth."
        )
    resolved = growth["plain_resolved"].fillna(False).astype(bool)
    flash = growth.index[(growth["backend"] == "flashinfer") & resolved & first]
    if len(flash):
        i = flash[-1]
        words.append(
            f"FlashInfer's plain step at {_streams(int(view['streams'].iloc[i]))} grew "
            f"{_shown(view, i, 'plain_step_us')} µs per 1,000 tokens of a stream's context, "
            f"{_shown(view, i, 'measured_over_model')} times the model's prediction: bandwidth-bound, as priced."
        )
    words += deep_target_words(view, growth)
    cells = context_cells(stored_runs(runs))
    pools, largest = cells["kv_pool_tokens"], (cells["context"] * cells["streams"]).max()
    words.append(
        f"The KV pool held {pools.min() / 1e6:.1f} to {pools.max() / 1e6:.1f} million tokens, the largest cell "
        f"{largest / 1e6:.2f} million: attention, not the pool, set every time here."
    )
    return " ".join(words)


def experts_words(runs: MeasuredRuns) -> str:
    """The finding on experts per verify (C streams x k tokens against C x k independent tokens and one draw per
    chain), every number the text of :func:`experts_view`'s cells."""
    view = experts_view(runs)
    if view.empty:
        return "No engine-reads expert count is stored: the experts a verify reads are priced, not counted."
    reads = expert_reads(stored_runs(runs))
    k = int(reads["verify_tokens"].iloc[0] // reads["streams"].iloc[0])
    overlap = view["equivalent_overlap"].iloc[0]
    rest = " and ".join(
        f"{_streams(int(view['streams'].iloc[i]))} {_shown(view, i, 'verify_reads')} "
        f"({_shown(view, i, 'verify_over_independent')})"
        for i in range(1, len(view))
    )
    return (
        f"A verify of {view['streams'].iloc[0]} streams x {k} tokens read {_shown(view, 0, 'verify_reads')} of "
        f"{reads['experts'].iloc[0]} experts per layer, against {_shown(view, 0, 'independent_tokens_read')} for "
        f"{reads['independent_tokens'].iloc[0]} independent tokens and {_shown(view, 0, 'one_draw_per_chain_reads')} "
        f"for one draw per chain (a ratio of {_shown(view, 0, 'verify_over_independent')}"
        + (f", the overlap {_shown(view, 0, 'equivalent_overlap')})" if not math.isnan(overlap) else ")")
        + (f"; at {rest}" if rest else "")
        + f". The random draft's chains held {cell_text('ids_per_chain', reads['ids_per_chain'].mean())} distinct ids "
        f"of {k}, and SGLang routed each verified token on its own: at {_streams(int(view['streams'].iloc[0]))} the "
        f"verify's {_shown(view, 0, 'ids_per_verify')} distinct ids reach "
        f"{_shown(view, 0, 'reached_by_its_ids')} experts as independent draws, against "
        f"{_shown(view, 0, 'verify_reads')} counted. A trained router's sharing within a chain stays a bound from "
        "these runs, not a value."
    )
