"""What SGLang really reads, from the one-GPU runs of ``benchmarks/engine_reads``: how much a stream's context adds
to a plain step and to an EAGLE-3 verify cycle per attention backend (beside the growth the model predicts from
the KV bytes), and how many experts a verify pass reads against independent and chain-shared tokens (beside the
model's overlaps). Each prediction is the one its run stores, committed before the run."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifylab.model.inputs.stored import StoredRuns

CONTEXT_PREDICTION = "context_prediction"
EXPERT_COUNTS = "expert_counts"
VERIFY_CHAINS = "verify_chains"
EXPERT_PREDICTION = "expert_prediction"
RESOLVED = 0.2  # attention's growth is read only where the step at the longer context is this much slower


def context_cells(runs: StoredRuns) -> pd.DataFrame:
    """The measured context cells of every run, one per GPU, shape, backend, mode, context and streams (a frame of
    the caller's own)."""
    return runs.engine.cells.copy()


def _per_1k(cells: pd.DataFrame, column: str, low: int, high: int, streams: int) -> tuple[float, bool]:
    """µs a stream's 1,000 tokens of context add to ``column`` between contexts ``low`` and ``high``, and whether the
    step grew enough there (:data:`RESOLVED`) for the growth to be attention's rather than the host's noise."""
    at = cells.set_index("context")[column]
    grown = float(at[high] - at[low])
    return grown * 1e3 / ((high - low) / 1000) / streams, grown > RESOLVED * float(at[low])


def attention_growth(runs: StoredRuns) -> pd.DataFrame:
    """Per target shape, backend and streams: the growth of a plain step and of a verify cycle per 1,000 tokens of
    a stream's context (µs, between the two longest contexts both modes measured), the cycle's per verified token, the
    cycle over the plain step, and the model's growth (one KV read per pass; the alternative once per verified
    token) from the prediction stored with the run."""
    cells = context_cells(runs)
    if cells.empty:
        return pd.DataFrame()
    predicted = runs.stacked(CONTEXT_PREDICTION).drop_duplicates(["gpu", "shape", "mode"], keep="last")
    predicted = predicted.set_index(["gpu", "shape", "mode"])  # a GPU's cells beside the prediction made for it
    rows = []
    for (gpu, shape, backend, streams), group in cells.groupby(["gpu", "shape", "backend", "streams"], sort=True):
        modes = {m: g for m, g in group.groupby("mode")}
        shared = sorted(set.intersection(*(set(g["context"]) for g in modes.values())))
        if len(shared) < 2:
            continue
        low, high = shared[-2], shared[-1]
        row = {
            "gpu": gpu,
            "shape": shape,
            "backend": backend,
            "streams": int(streams),
            "context_low": low,
            "context_high": high,
            "runs": ", ".join(sorted(group["run"].unique())),
        }
        for mode, column, name in (("plain", "step_ms", "plain"), ("eagle3", "cycle_ms", "cycle")):
            if mode in modes:
                growth, resolved = _per_1k(modes[mode], column, low, high, int(streams))
                row[f"{name}_us_per_1k"], row[f"{name}_resolved"] = growth, resolved
        if "eagle3" in modes:
            tokens = int(modes["eagle3"]["verify_tokens"].iloc[0])
            row["verify_tokens"] = tokens
            row["cycle_per_verified_token_us_per_1k"] = row["cycle_us_per_1k"] / tokens
        for mode in ("plain", "eagle3"):
            if (gpu, shape, mode) in predicted.index:
                p = predicted.loc[(gpu, shape, mode)]
                row[f"predicted_{mode}_once_per_pass_us_per_1k"] = float(p["once_per_pass_us_per_1k"])
                row[f"predicted_{mode}_once_per_token_us_per_1k"] = float(p["once_per_token_us_per_1k"])
        row["kv_pool_tokens"] = int(group["kv_pool_tokens"].min())
        row["largest_cell_tokens"] = int((group["context"] * group["streams"]).max())
        rows.append(row)
    frame = pd.DataFrame(rows)
    if {"cycle_us_per_1k", "plain_us_per_1k"} <= set(frame.columns):
        resolved = frame["plain_resolved"].fillna(False).astype(bool)
        frame["cycle_over_plain"] = (frame["cycle_us_per_1k"] / frame["plain_us_per_1k"]).where(resolved)
    return frame


@dataclass(frozen=True)
class ExpertShape:
    """The counted MoE: its routed experts and the experts each token picks."""

    experts: int
    per_token: int

    def union_of(self, draws: float) -> float:
        """Expected distinct experts ``draws`` independent draws of ``per_token`` experts reach."""
        return self.experts * (1 - (1 - self.per_token / self.experts) ** draws)

    def draws_for(self, distinct: float) -> float:
        """Independent draws of ``per_token`` experts whose expected union is ``distinct`` (inf: every expert)."""
        if distinct >= self.experts:
            return math.inf
        return math.log(1 - distinct / self.experts) / math.log(1 - self.per_token / self.experts)


def _shape_of(runs: StoredRuns, run_id: str) -> ExpertShape:
    config = runs.parameters(run_id).get("config", {}).get("target", {})
    return ExpertShape(int(config.get("num_experts", 0)), int(config.get("num_experts_per_tok", 0)))


def _mean_experts(counts: pd.DataFrame, mode: str, tokens: int) -> tuple[float, int]:
    """Mean distinct experts per layer over the passes of ``mode`` that held ``tokens`` tokens (else the nearest
    count within 1 %), and the tokens those passes held."""
    of_mode = counts[counts["mode"] == mode]
    sizes = sorted(of_mode["tokens"].unique(), key=lambda t: (abs(t - tokens), -t))
    if not sizes or abs(sizes[0] - tokens) > 0.01 * tokens:
        return float("nan"), 0
    return float(of_mode[of_mode["tokens"] == sizes[0]]["distinct_experts"].mean()), int(sizes[0])


def expert_reads(runs: StoredRuns) -> pd.DataFrame:
    """Per stream count of the verify passes counted: distinct experts a verify of C streams x k tokens read (mean
    per layer), those of C x k independent tokens (plain decoding at C x k streams) and of C tokens (a chain sharing
    one token's experts), their ratio, the routing overlap that count equals (:func:`independent_draws` inverted
    over the distinct draws), the ids a chain and a verify held, the experts those ids reach as independent draws
    (routing by token identity), and the model's predictions stored with the run."""
    rows = []
    chains_of = {t.run_id: t.frame for t in runs.run_tables(VERIFY_CHAINS)}
    predictions = {t.run_id: t.frame for t in runs.run_tables(EXPERT_PREDICTION)}
    for stored in runs.run_tables(EXPERT_COUNTS):
        run_id, counts, chains = stored.run_id, stored.frame, chains_of.get(stored.run_id)
        if chains is None:
            continue
        shape = _shape_of(runs, run_id)
        predicted = predictions.get(run_id)
        verify = counts[counts["mode"] == "eagle3_verify"]
        for streams in sorted(verify["streams"].unique()):
            of_c = chains[chains["streams"] == streams]
            k = round(int(verify[verify["streams"] == streams]["tokens"].max()) / streams)
            read, _ = _mean_experts(verify[verify["streams"] == streams], "eagle3_verify", streams * k)
            independent, independent_tokens = _mean_experts(counts, "plain", streams * k)
            shared, _ = _mean_experts(counts, "plain", streams)
            draws = shape.draws_for(read)
            ids = float(verify[verify["streams"] == streams]["distinct_tokens"].mean())
            row = {
                "streams": int(streams),
                "verify_tokens": streams * k,
                "ids_per_chain": float(of_c["distinct_ids"].mean()),
                "ids_per_verify": ids,
                "verify_experts": read,
                "expected_from_ids": shape.union_of(ids),
                "independent_experts": independent,
                "independent_tokens": independent_tokens,
                "shared_experts": shared,
                "verify_over_independent": read / independent,
                "equivalent_overlap": np.nan if math.isinf(draws) else 1 - (draws / streams - 1) / (k - 1),
                "experts": shape.experts,
                "run": run_id,
            }
            if predicted is not None:
                mine = predicted[(predicted["streams"] == streams) & (predicted["mode"] != "plain")]
                for label, column in (
                    ("independent (0)", "predicted_overlap_0"),
                    ("shared (1)", "predicted_overlap_1"),
                    ("fitted low", "predicted_fitted_low"),
                    ("fitted high", "predicted_fitted_high"),
                ):
                    hit = mine[mine["overlap"] == label]
                    row[column] = float(hit["distinct_experts"].iloc[0]) if not hit.empty else np.nan
            rows.append(row)
    return pd.DataFrame(rows)
