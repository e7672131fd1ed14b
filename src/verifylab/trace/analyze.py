"""Per-step breakdown of profiler traces: all-reduce counts, communication vs compute, idle, exposure,
arrival skew across ranks. Reading is in ``reader``, cutting a rank into steps in ``steps``, what a kernel is
in ``classify``."""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from verifylab.errors import TraceError
from verifylab.trace.classify import classify_cpu_collective, classify_kernel
from verifylab.trace.files import assign_ranks, expand_paths
from verifylab.trace.intervals import last_at_or_before, outermost, overlap_length, union_length
from verifylab.trace.pool import Progress, bytes_read, run_jobs
from verifylab.trace.ranks import align_ranks, rank_disagreements
from verifylab.trace.reader import Event
from verifylab.trace.steps import (
    DEFAULT_STEP_MARKER,
    STEP_COLUMNS,
    RankEvents,
    label_graph_phases,
    load_rank_events,
    segment_steps,
)

DTYPE_BYTES = {
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "half": 2,
    "float": 4,
    "float32": 4,
    "fp32": 4,
    "double": 8,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "int8": 1,
    "uint8": 1,
    "c10::bfloat16": 2,
    "c10::half": 2,
}


PER_STEP_NUMERIC = [
    "span_us",
    "allreduce_count",
    "allgather_count",
    "comm_us",
    "compute_us",
    "idle_us",
    "exposed_comm_us",
    "norm_us",
    "gemm_moe_us",
    "attention_us",
]


def collective_levels(events: list[Event]) -> tuple[list[Event], list[Event]]:
    """(counted, timed): one all-reduce appears as a c10d op, a record_param_comms range and the backend's
    op (gloo:/nccl:, often on another thread). Count the front-end level only; time with the backend op,
    which is the work itself, when present."""
    front = [e for e in events if e.name.startswith("c10d::")]
    params = [e for e in events if e.name == "record_param_comms"]
    backend = [e for e in events if ":" in e.name and not e.name.startswith("c10d::")]
    counted = outermost(front or params or backend)
    timed = outermost(backend) if backend and len(outermost(backend)) == len(counted) else counted
    return counted, timed


def _message_bytes(ev: Event) -> int | None:
    nelems = ev.args.get("In msg nelems")
    dtype = str(ev.args.get("dtype", "")).lower()
    if nelems is None or dtype not in DTYPE_BYTES:
        return None
    return int(nelems) * DTYPE_BYTES[dtype]


def analyze_rank(rank: RankEvents, message_bytes: int | None = None) -> dict[str, pd.DataFrame | list[str]]:
    """Per-step rows, the collectives and time per kernel class of one rank."""
    segmented = segment_steps(rank)
    steps, how, corr_step = segmented.spans, segmented.how, segmented.graph_step
    notes: list[str] = []
    starts = [s[2] for s in steps]
    kernels_by_step: dict[int, list[Event]] = defaultdict(list)
    if corr_step:
        for k in rank.kernels:
            step = corr_step.get(int(k.args.get("correlation", -1)))
            if step is not None:
                kernels_by_step[step].append(k)
        eager = sum(1 for k in rank.kernels if int(k.args.get("correlation", -1)) not in corr_step)
        if eager:
            notes.append(f"rank {rank.rank}: {eager} kernels outside CUDA-graph launches were not assigned to a step")
    else:
        for k in rank.kernels:
            idx = last_at_or_before(starts, k.ts)
            if idx is not None and (not segmented.bounded or k.ts < steps[idx][3]):
                kernels_by_step[idx].append(k)
    cpu_by_step: dict[int, list[Event]] = defaultdict(list)
    cpu_spans = [segmented.cpu_span(i) for i in range(len(steps))]
    if all(cpu_spans):
        cpu_starts = [span[0] for span in cpu_spans]
        for ev in rank.cpu_collectives:
            idx = last_at_or_before(cpu_starts, ev.ts)
            if idx is not None and ev.ts <= cpu_spans[idx][1]:
                cpu_by_step[idx].append(ev)

    rows, colls, classes = [], [], []
    for phase, idx, start, end in steps:
        ks = kernels_by_step.get(idx, [])
        classified = [(k, classify_kernel(k.name, k.cat)) for k in ks]
        device_colls = [(k, c) for k, c in classified if c.group in ("allreduce", "allgather", "collective")]
        cpu_colls, cpu_timed = collective_levels(cpu_by_step.get(idx, []))
        sizes = [b for b in (_message_bytes(e) for e in cpu_by_step.get(idx, [])) if b]
        if device_colls:
            comm_iv = [(k.ts, k.end) for k, _ in device_colls]
            compute_iv = [
                (k.ts, k.end) for k, c in classified if c.group not in ("allreduce", "allgather", "collective")
            ]
            all_iv = comm_iv + compute_iv
            span = (max(e for _, e in all_iv) - min(s for s, _ in all_iv)) if all_iv else 0.0
            comm_us, compute_us = union_length(comm_iv), union_length(compute_iv)
            idle_us = span - union_length(all_iv)
            exposed = comm_us - overlap_length(comm_iv, compute_iv)
            kinds = Counter(c.group for _, c in device_colls)
            impls = Counter(c.impl for _, c in device_colls if c.group == "allreduce")
            suffixes = Counter(
                c.name_suffix for _, c in device_colls if c.impl == "nccl" and c.group == "allreduce" and c.name_suffix
            )
            source = "device kernels"
            for n, (k, c) in enumerate(sorted(device_colls, key=lambda kc: kc[0].ts)):
                colls.append(
                    {
                        "rank": rank.rank,
                        "step": idx,
                        "ordinal": n,
                        "kind": c.group,
                        "impl": c.impl,
                        "name_suffix": c.name_suffix,
                        "name": k.name[:160],
                        "start_us": k.ts,
                        "dur_us": k.dur,
                    }
                )
        elif cpu_colls:
            comm_iv = [(e.ts, e.end) for e in cpu_timed]
            span = end - start
            comm_us = union_length(comm_iv)
            compute_us, idle_us, exposed = max(span - comm_us, 0.0), 0.0, comm_us
            kinds, impls, suffixes = Counter(), Counter(), Counter()
            backends = {classify_cpu_collective(e.name, e.args)[1] for e in cpu_timed} - {"c10d"}
            for n, ev in enumerate(cpu_colls):
                timed = cpu_timed[n] if len(cpu_timed) == len(cpu_colls) else ev
                kind, backend = classify_cpu_collective(ev.name, ev.args) or ("collective", "?")
                backend = "/".join(sorted(backends)) or backend
                kinds[kind] += 1
                if kind == "allreduce":
                    impls[backend] += 1
                colls.append(
                    {
                        "rank": rank.rank,
                        "step": idx,
                        "ordinal": n,
                        "kind": kind,
                        "impl": backend,
                        "name_suffix": None,
                        "name": ev.name,
                        "start_us": timed.ts,
                        "dur_us": timed.dur,
                    }
                )
            source = "CPU ops (no device kernels)"
        else:
            all_iv = [(k.ts, k.end) for k, _ in classified]
            span = (max(e for _, e in all_iv) - min(s for s, _ in all_iv)) if all_iv else end - start
            comm_us, compute_us = 0.0, union_length(all_iv) if all_iv else span
            idle_us, exposed = (span - compute_us) if all_iv else 0.0, 0.0
            kinds, impls, suffixes = Counter(), Counter(), Counter()
            source = "device kernels" if all_iv else "CPU ops"
        by_group: dict[str, list[float]] = defaultdict(list)
        for k, c in classified:
            by_group[c.group].append(k.dur)
            if c.also_norm:
                by_group["norm (fused in all-reduce)"].append(0.0)
        for group, durs in by_group.items():
            classes.append({"rank": rank.rank, "step": idx, "group": group, "count": len(durs), "total_us": sum(durs)})
        if sizes:
            bytes_per, bytes_source = float(pd.Series(sizes).median()), "trace (record_param_comms)"
        elif message_bytes:
            bytes_per, bytes_source = float(message_bytes), "model config (trace has no sizes)"
        else:
            bytes_per, bytes_source = None, "unknown"
        rows.append(
            {
                "rank": rank.rank,
                "step": idx,
                "phase": phase,
                "span_us": span,
                "kernel_count": len(ks),
                "allreduce_count": kinds.get("allreduce", 0),
                "allgather_count": kinds.get("allgather", 0),
                "other_collective_count": kinds.get("collective", 0),
                "comm_us": comm_us,
                "comm_wait_us": None,
                "comm_transfer_us": None,
                "compute_us": compute_us,
                "idle_us": max(idle_us, 0.0),
                "exposed_comm_us": max(exposed, 0.0),
                "norm_us": sum(by_group.get("norm", [])),
                "gemm_moe_us": sum(by_group.get("gemm_moe", [])),
                "attention_us": sum(by_group.get("attention", [])),
                "bytes_per_allreduce": bytes_per,
                "bytes_source": bytes_source,
                "allreduce_impls": ", ".join(f"{k}:{v}" for k, v in sorted(impls.items())),
                "nccl_name_suffixes": ", ".join(f"{k}:{v}" for k, v in sorted(suffixes.items())),
                "source": f"{source}; steps from {how}",
            }
        )
    if how == "CUDA-graph launches":
        label_graph_phases(rows)
    return {
        "steps": pd.DataFrame(rows, columns=STEP_COLUMNS),
        "collectives": pd.DataFrame(colls),
        "kernel_classes": pd.DataFrame(classes),
        "kernels": kernel_totals(rank),
        "notes": notes,
    }


def kernel_totals(rank: RankEvents) -> pd.DataFrame:
    """Every device kernel of one rank by name, as the library emitted it: count, total time, class."""
    totals: dict[tuple[str, str], list[float]] = defaultdict(list)
    for k in rank.kernels:
        totals[(k.name, k.cat)].append(k.dur)
    rows = [
        {
            "rank": rank.rank,
            "kernel": name,
            "group": classify_kernel(name, cat).group,
            "count": len(durs),
            "total_us": sum(durs),
        }
        for (name, cat), durs in totals.items()
    ]
    frame = pd.DataFrame(rows, columns=["rank", "kernel", "group", "count", "total_us"])
    return frame.sort_values("total_us", ascending=False, ignore_index=True)


@dataclass
class TraceSummary:
    """What ``summarize_traces`` returns: tidy tables plus notes the reader must see."""

    steps: pd.DataFrame
    collectives: pd.DataFrame
    kernel_classes: pd.DataFrame
    files: list[str]
    notes: list[str] = field(default_factory=list)
    kernels: pd.DataFrame = field(default_factory=pd.DataFrame)

    def per_step(self) -> pd.DataFrame:
        """Mean over ranks of each step: the figure a chapter shows."""
        numeric = PER_STEP_NUMERIC
        frame = self.steps.copy()
        frame[numeric] = frame[numeric].astype(float)
        return frame.groupby(["step", "phase"], as_index=False)[numeric].mean()

    def rank_skew(self) -> pd.DataFrame:
        """Per step, the spread across ranks of span and communication time."""
        g = self.steps.groupby("step")
        return pd.DataFrame(
            {
                "span_skew_us": g["span_us"].max() - g["span_us"].min(),
                "comm_skew_us": g["comm_us"].max() - g["comm_us"].min(),
            }
        ).reset_index()

    def to_json(self) -> dict:
        return {
            "files": self.files,
            "notes": self.notes,
            "steps": json.loads(self.steps.to_json(orient="records")),
            "rank_skew": json.loads(self.rank_skew().to_json(orient="records")),
        }


def _summarize_one(args: tuple[str, int, str, int | None, int]) -> dict:
    path, rank, marker, message_bytes, slot = args
    return analyze_rank(load_rank_events(Path(path), rank, marker, bytes_read(slot)), message_bytes)


def summarize_traces(
    paths: list[Path | str],
    step_marker: str | None = None,
    message_bytes: int | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> TraceSummary:
    """Summarize one trace per rank (files or folders). Ranks are read in parallel processes; ``progress(read,
    total)`` hears the bytes read across all of them; the first bad file ends the read."""
    files = expand_paths(paths)
    marker = step_marker or DEFAULT_STEP_MARKER
    try:
        re.compile(marker)
    except re.error as exc:
        raise TraceError(f"--step-marker {marker!r} is not a valid regular expression: {exc}") from None
    ranked = assign_ranks(files)
    jobs = [(str(f), rank, marker, message_bytes, slot) for slot, (f, rank) in enumerate(ranked)]
    n_workers = min(len(jobs), workers or os.cpu_count() or 1)
    parts = run_jobs(_summarize_one, jobs, [Path(f).stat().st_size for f, _ in ranked], n_workers, progress)
    steps = pd.concat([p["steps"] for p in parts], ignore_index=True)
    colls = pd.concat([p["collectives"] for p in parts], ignore_index=True)
    classes = pd.concat([p["kernel_classes"] for p in parts], ignore_index=True)
    kernels = pd.concat([p["kernels"] for p in parts], ignore_index=True)
    notes = [n for p in parts for n in p["notes"]]
    steps = align_ranks(steps, colls) if not colls.empty else steps
    if steps.empty or steps["allreduce_count"].sum() == 0:
        notes.append("no collective operation (all-reduce or other) was found in these traces")
    if not colls.empty and colls["name_suffix"].notna().any():
        notes.append(
            "NCCL kernel names carry suffixes such as _RING_LL: they are names, not proof of the "
            "algorithm or protocol that ran"
        )
    notes += rank_disagreements(steps)
    if (steps["bytes_source"] == "model config (trace has no sizes)").any() and steps["allreduce_count"].sum():
        notes.append("message sizes come from the model config: the trace records none (CUDA-graph replay)")
    return TraceSummary(
        steps.sort_values(["rank", "step"]).reset_index(drop=True),
        colls,
        classes,
        [str(f) for f in files],
        notes,
        kernels,
    )


ALLREDUCE_KERNEL_COLUMNS = ["phase", "impl", "kernel", "per_pass", "passes"]


def allreduce_kernels_per_pass(summary: TraceSummary) -> pd.DataFrame:
    """Per phase (target, draft, ...): all-reduce kernels per pass by implementation (NCCL, SGLang custom,
    FlashInfer fused) and emitted name, averaged over the phase's passes and the ranks."""
    colls = summary.collectives
    if colls.empty or "kind" not in colls or not (colls["kind"] == "allreduce").any():
        return pd.DataFrame(columns=ALLREDUCE_KERNEL_COLUMNS)
    steps = summary.steps[["rank", "step", "phase"]]
    passes = steps.groupby(["rank", "phase"]).size().rename("passes").reset_index()
    found = colls[colls["kind"] == "allreduce"].merge(steps, on=["rank", "step"])
    counts = found.groupby(["rank", "phase", "impl", "name"]).size().rename("count").reset_index()
    counts = counts.merge(passes, on=["rank", "phase"])
    counts["per_pass"] = counts["count"] / counts["passes"]
    out = counts.groupby(["phase", "impl", "name"], as_index=False).agg(
        per_pass=("per_pass", "mean"), passes=("passes", "max")
    )
    return out.rename(columns={"name": "kernel"})[ALLREDUCE_KERNEL_COLUMNS].sort_values(
        ["phase", "per_pass"], ascending=[True, False], ignore_index=True
    )
