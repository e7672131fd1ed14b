"""Across the ranks of one capture: each collective's arrival wait vs transfer, and where the ranks disagree."""

from __future__ import annotations

import pandas as pd

from verifylab.trace.steps import STEP_COLUMNS


def align_ranks(steps: pd.DataFrame, colls: pd.DataFrame) -> pd.DataFrame:
    """Split each collective's time into arrival wait and transfer, aligning ranks on one host's clock.

    For collective j of a step, the last rank to arrive starts at max_r(start); a rank's wait is that
    minus its own start, its transfer is its end minus that. Needs >= 2 ranks with the same collectives.
    """
    n_ranks = colls["rank"].nunique() if not colls.empty else 0
    if n_ranks < 2:
        return steps
    c = colls[["rank", "step", "ordinal", "start_us", "dur_us"]].copy()
    groups = c.groupby(["step", "ordinal"])["start_us"]
    c["last"], c["n"] = groups.transform("max"), groups.transform("count")
    c = c[c["n"] == n_ranks]
    c["comm_wait_us"] = (c["last"] - c["start_us"]).clip(lower=0.0)
    c["comm_transfer_us"] = (c["start_us"] + c["dur_us"] - c["last"]).clip(lower=0.0)
    sums = c.groupby(["rank", "step"], as_index=False)[["comm_wait_us", "comm_transfer_us"]].sum()
    out = steps.drop(columns=["comm_wait_us", "comm_transfer_us"]).merge(sums, on=["rank", "step"], how="left")
    return out[STEP_COLUMNS]


def rank_disagreements(steps: pd.DataFrame) -> list[str]:
    """Notes when the ranks of one capture do not agree: different numbers of steps, or different all-reduce
    counts in the same step (a rank that lost events, or traces of two captures mixed)."""
    if steps.empty or steps["rank"].nunique() < 2:
        return []
    notes = []
    per_rank = steps.groupby("rank").size()
    if per_rank.nunique() > 1:
        counts = ", ".join(f"rank {r}: {n}" for r, n in per_rank.items())
        notes.append(f"the ranks hold different numbers of steps ({counts}): per-step figures pair unlike steps")
    by_step = steps.pivot_table(index="step", columns="rank", values="allreduce_count", aggfunc="sum")
    differ = by_step[by_step.nunique(axis=1) > 1].dropna()
    if not differ.empty:
        step = differ.index[0]
        counts = ", ".join(f"rank {r}: {int(n)}" for r, n in differ.loc[step].items())
        notes.append(f"{len(differ)} step(s) with different all-reduce counts across ranks (step {step}: {counts})")
    return notes
