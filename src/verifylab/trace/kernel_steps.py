"""The device-kernel half of the per-step breakdown, in array operations over a rank's kernel columns: which
step each kernel belongs to, then per step the kernel and collective counts, the time covered by
communication, by compute and by both, time per kernel class, and the collectives in order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifylab.trace.columns import KernelColumns, object_array
from verifylab.trace.intervals import union_lengths

COLLECTIVE_GROUPS = ("allreduce", "allgather", "collective")
FUSED_NORM_GROUP = "norm (fused in all-reduce)"  # a fused all-reduce + norm kernel also counts here, at 0 us
COLLECTIVE_COLUMNS = ["rank", "step", "ordinal", "kind", "impl", "name_suffix", "name", "start_us", "dur_us"]
CLASS_COLUMNS = ["rank", "step", "group", "count", "total_us"]
NAME_CHARS = 160


def kernel_step_index(
    kernels: KernelColumns,
    starts: list[float],
    ends: list[float],
    bounded: bool,
    graph_step: dict[int, int],
) -> np.ndarray:
    """Each kernel's step (-1: none). Under CUDA-graph replay a kernel belongs to the launch its correlation id
    names; otherwise to the last step starting at or before it (and, with GPU-timeline markers, only if it
    starts before that step ends)."""
    if graph_step:
        launches = np.array(sorted(graph_step), dtype=np.int64)
        steps = np.array([graph_step[c] for c in launches], dtype=np.int64)
        pos = np.clip(np.searchsorted(launches, kernels.correlation), 0, len(launches) - 1)
        return np.where(launches[pos] == kernels.correlation, steps[pos], -1)
    if not starts:
        return np.full(len(kernels), -1, dtype=np.int64)
    idx = np.searchsorted(np.asarray(starts), kernels.ts, side="right") - 1
    if bounded:
        inside = kernels.ts < np.asarray(ends)[np.maximum(idx, 0)]
        idx = np.where(inside, idx, -1)
    return idx


@dataclass(frozen=True)
class DeviceSteps:
    """Per-step arrays (index = step) from the kernels assigned to steps, plus the tables by step."""

    kernel_count: np.ndarray
    collective_count: np.ndarray
    first_start: np.ndarray  # nan where a step has no kernel
    last_end: np.ndarray
    comm_us: np.ndarray  # covered by collective kernels
    compute_us: np.ndarray  # covered by all other kernels
    busy_us: np.ndarray  # covered by any kernel
    kinds: pd.DataFrame  # step x collective group: count
    impls: dict[int, str]  # all-reduce kernels by implementation, "impl:n, ..."
    nccl_suffixes: dict[int, str]
    group_us: pd.DataFrame  # step x kernel group: total us
    classes: pd.DataFrame  # CLASS_COLUMNS without rank
    collectives: pd.DataFrame  # COLLECTIVE_COLUMNS without rank

    def kind_count(self, step: int, kind: str) -> int:
        return int(self._cells("kinds").get((step, kind), 0))

    def group_total(self, step: int, group: str) -> float:
        return float(self._cells("group_us").get((step, group), 0.0))

    def _cells(self, table: str) -> dict[tuple[int, str], float]:
        """A step x column table as {(step, column): value}, made once (a lookup per step and column is a dict's)."""
        made = self.__dict__.setdefault("_cell_maps", {})
        if table not in made:
            frame = getattr(self, table)
            made[table] = {(step, column): value for column in frame.columns for step, value in frame[column].items()}
        return made[table]


def device_steps(kernels: KernelColumns, step_of: np.ndarray, n_steps: int) -> DeviceSteps:
    """Everything per step that comes from the device kernels assigned to it (``step_of``, -1: unassigned)."""
    sel = np.flatnonzero(step_of >= 0)
    step, code = step_of[sel], kernels.code[sel]
    ts, dur = kernels.ts[sel], kernels.dur[sel]
    end = ts + dur
    group = kernels.per_code("group")
    coll = np.isin(group, COLLECTIVE_GROUPS)[code]
    frame = pd.DataFrame({"step": step, "ts": ts, "end": end})
    by_step = frame.groupby("step")
    first_start = by_step["ts"].min().reindex(range(n_steps)).to_numpy()
    last_end = by_step["end"].max().reindex(range(n_steps)).to_numpy()
    per_code = _per_step_and_code(kernels, step, code, dur)
    collective_rows = per_code[per_code["group"].isin(COLLECTIVE_GROUPS)]
    allreduce_rows = collective_rows[collective_rows["group"] == "allreduce"]
    suffix_rows = allreduce_rows[(allreduce_rows["impl"] == "nccl") & allreduce_rows["name_suffix"].notna()]
    classes = _class_rows(per_code)
    return DeviceSteps(
        kernel_count=np.bincount(step, minlength=n_steps),
        collective_count=np.bincount(step[coll], minlength=n_steps),
        first_start=first_start,
        last_end=last_end,
        comm_us=union_lengths(step[coll], ts[coll], end[coll], n_steps),
        compute_us=union_lengths(step[~coll], ts[~coll], end[~coll], n_steps),
        busy_us=union_lengths(step, ts, end, n_steps),
        kinds=collective_rows.pivot_table(index="step", columns="group", values="count", aggfunc="sum"),
        impls=_joined_counts(allreduce_rows, "impl"),
        nccl_suffixes=_joined_counts(suffix_rows, "name_suffix"),
        group_us=per_code.pivot_table(index="step", columns="group", values="total_us", aggfunc="sum"),
        classes=classes,
        collectives=_collective_rows(kernels, sel[coll], step[coll]),
    )


def _per_step_and_code(kernels: KernelColumns, step: np.ndarray, code: np.ndarray, dur: np.ndarray) -> pd.DataFrame:
    """One row per (step, distinct kernel): count, total time, where it first appears, and its class."""
    n_codes = max(len(kernels.keys), 1)
    pair = step.astype(np.int64) * n_codes + code
    unique, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    codes = unique % n_codes
    out = pd.DataFrame(
        {
            "step": unique // n_codes,
            "code": codes,
            "count": np.bincount(inverse, minlength=len(unique)),
            "total_us": np.bincount(inverse, weights=dur, minlength=len(unique)),
            "first": first,
        }
    )
    for attribute in ("group", "impl", "name_suffix", "also_norm"):
        out[attribute] = kernels.per_code(attribute)[codes]
    return out


def _class_rows(per_code: pd.DataFrame) -> pd.DataFrame:
    """Per step and kernel group: how many kernels and their total time, groups in order of first appearance;
    fused all-reduce + norm kernels are counted again as the fused-norm group (at 0 us)."""
    groups = per_code.groupby(["step", "group"], as_index=False).agg(
        count=("count", "sum"), total_us=("total_us", "sum"), first=("first", "min")
    )
    fused = per_code[per_code["also_norm"].astype(bool)]
    fused = fused.groupby("step", as_index=False).agg(count=("count", "sum"), first=("first", "min"))
    fused = fused.assign(group=FUSED_NORM_GROUP, total_us=0.0, first=fused["first"] + 0.5)
    both = pd.concat([groups, fused[groups.columns]], ignore_index=True) if len(fused) else groups
    both = both.sort_values(["step", "first"], kind="stable", ignore_index=True)
    return both[["step", "group", "count", "total_us"]]


def _joined_counts(rows: pd.DataFrame, column: str) -> dict[int, str]:
    """Per step, "value:count, ..." sorted by value (the way a step row lists implementations)."""
    totals = rows.groupby(["step", column])["count"].sum()
    out: dict[int, list[str]] = {}
    for (step, value), count in totals.items():
        out.setdefault(int(step), []).append(f"{value}:{count}")
    return {step: ", ".join(parts) for step, parts in out.items()}


def _collective_rows(kernels: KernelColumns, index: np.ndarray, step: np.ndarray) -> pd.DataFrame:
    """The collective kernels, per step in start order (ties in trace order), numbered from 0 in each step."""
    order = np.lexsort((kernels.ts[index], step))
    index, step = index[order], step[order]
    position = np.arange(len(index))
    opens = np.ones(len(index), dtype=bool)
    opens[1:] = step[1:] != step[:-1]
    ordinal = position - np.maximum.accumulate(np.where(opens, position, 0)) if len(index) else position
    code = kernels.code[index]
    names = object_array([name[:NAME_CHARS] for name, _ in kernels.keys])
    return pd.DataFrame(
        {
            "step": step,
            "ordinal": ordinal,
            "kind": kernels.per_code("group")[code],
            "impl": kernels.per_code("impl")[code],
            "name_suffix": kernels.per_code("name_suffix")[code],
            "name": names[code],
            "start_us": kernels.ts[index],
            "dur_us": kernels.dur[index],
        }
    )


def kernel_totals(kernels: KernelColumns, rank: int) -> pd.DataFrame:
    """Every device kernel of one rank by name, as the library emitted it: count, total time, class."""
    counts = np.bincount(kernels.code, minlength=len(kernels.keys))
    totals = np.bincount(kernels.code, weights=kernels.dur, minlength=len(kernels.keys))
    frame = pd.DataFrame(
        {
            "rank": rank,
            "kernel": [name for name, _ in kernels.keys],
            "group": kernels.per_code("group"),
            "count": counts,
            "total_us": totals,
        },
        columns=["rank", "kernel", "group", "count", "total_us"],
    )
    return frame.sort_values("total_us", ascending=False, ignore_index=True)
