"""Per-step breakdown of profiler traces: all-reduce counts, communication vs compute, idle, exposure,
arrival skew across ranks. Reading is in ``reader``, cutting a rank into steps in ``steps``, what a kernel is
in ``classify``."""

from __future__ import annotations

import gc
import json
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from verifylab.errors import TraceError
from verifylab.trace.classify import classify_cpu_collective
from verifylab.trace.files import assign_ranks, expand_paths
from verifylab.trace.intervals import last_at_or_before, outermost, union_length
from verifylab.trace.kernel_steps import (
    CLASS_COLUMNS,
    COLLECTIVE_COLUMNS,
    COLLECTIVE_GROUPS,
    device_steps,
    kernel_step_index,
    kernel_totals,
)
from verifylab.trace.pool import Progress, bytes_read, run_jobs
from verifylab.trace.ranks import align_ranks, rank_disagreements
from verifylab.trace.reader import Event, check_head, check_tail
from verifylab.trace.steps import (
    DEFAULT_STEP_MARKER,
    STEP_COLUMNS,
    RankEvents,
    Steps,
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


PHASE_COLUMNS = [
    "phase",
    "steps",
    "ranks",
    "allreduce_count",
    "allreduce_impls",
    "comm_us",
    "compute_us",
    "idle_us",
    "exposed_comm_us",
    "comm_wait_us",
]
PER_STEP_SKIPPED = {"kernel_count", "other_collective_count", "comm_wait_us", "comm_transfer_us"}
# the numbers of a step a chapter shows, averaged over ranks (:meth:`TraceAnalysis.per_step`): the step's own columns
PER_STEP_NUMERIC = [c for c in STEP_COLUMNS if (c.endswith(("_us", "_count")) and c not in PER_STEP_SKIPPED)]


def collective_levels(events: list[Event]) -> tuple[list[Event], list[Event]]:
    """(counted, timed): one all-reduce appears as a c10d op, a record_param_comms range and the backend's
    op (gloo:/nccl:, often on another thread). Count the front-end level only; time with the backend op,
    which is the work itself, when present."""
    front = [e for e in events if e.name.startswith("c10d::")]
    params = [e for e in events if e.name == "record_param_comms"]
    backend = [e for e in events if ":" in e.name and not e.name.startswith("c10d::")]
    counted = outermost(front or params or backend)
    ops = outermost(backend) if backend else []  # the backend's own ops, once
    timed = ops if ops and len(ops) == len(counted) else counted
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
    steps, how = segmented.spans, segmented.how
    notes: list[str] = []
    step_of = kernel_step_index(
        rank.kernels, [s[2] for s in steps], [s[3] for s in steps], segmented.bounded, segmented.graph_step
    )
    if segmented.graph_step:
        eager = int((step_of < 0).sum())
        if eager:
            notes.append(f"rank {rank.rank}: {eager} kernels outside CUDA-graph launches were not assigned to a step")
    device = device_steps(rank.kernels, step_of, len(steps))
    cpu_by_step = _cpu_collectives_by_step(rank, segmented)

    rows, cpu_colls_rows = [], []
    for phase, idx, start, end in steps:
        cpu_events = cpu_by_step.get(idx, [])
        sizes = [b for e in cpu_events if e.args and (b := _message_bytes(e))]  # no args (most): no size
        kinds = {kind: device.kind_count(idx, kind) for kind in COLLECTIVE_GROUPS}
        impls, suffixes = device.impls.get(idx, ""), device.nccl_suffixes.get(idx, "")
        has_kernels = device.kernel_count[idx] > 0
        span = float(device.last_end[idx] - device.first_start[idx]) if has_kernels else end - start
        if device.collective_count[idx]:
            comm_us, compute_us = float(device.comm_us[idx]), float(device.compute_us[idx])
            idle_us = span - float(device.busy_us[idx])
            exposed = float(device.busy_us[idx]) - compute_us  # communication not under any compute
            source = "device kernels"
        elif cpu_events and (levels := collective_levels(cpu_events))[0]:  # the CPU ops only where no kernel is
            cpu_colls, cpu_timed = levels
            span = end - start
            comm_us = union_length([(e.ts, e.end) for e in cpu_timed])
            compute_us, idle_us, exposed = max(span - comm_us, 0.0), 0.0, comm_us
            rows_here, kinds, backend_counts = _cpu_collective_rows(rank.rank, idx, cpu_colls, cpu_timed)
            cpu_colls_rows += rows_here
            impls = ", ".join(f"{k}:{v}" for k, v in sorted(backend_counts.items()))
            source = "CPU ops (no device kernels)"
        else:
            comm_us, exposed = 0.0, 0.0
            compute_us = float(device.busy_us[idx]) if has_kernels else span
            idle_us = span - compute_us if has_kernels else 0.0
            source = "device kernels" if has_kernels else "CPU ops"
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
                "kernel_count": int(device.kernel_count[idx]),
                "allreduce_count": kinds.get("allreduce", 0),
                "allgather_count": kinds.get("allgather", 0),
                "other_collective_count": kinds.get("collective", 0),
                "comm_us": comm_us,
                "comm_wait_us": None,
                "comm_transfer_us": None,
                "compute_us": compute_us,
                "idle_us": max(idle_us, 0.0),
                "exposed_comm_us": max(exposed, 0.0),
                "norm_us": device.group_total(idx, "norm"),
                "gemm_moe_us": device.group_total(idx, "gemm_moe"),
                "attention_us": device.group_total(idx, "attention"),
                "bytes_per_allreduce": bytes_per,
                "bytes_source": bytes_source,
                "allreduce_impls": impls,
                "nccl_name_suffixes": suffixes,
                "source": f"{source}; steps from {how}",
            }
        )
    if how == "CUDA-graph launches":
        label_graph_phases(rows)
    collectives = device.collectives.assign(rank=rank.rank)
    if cpu_colls_rows:  # (concatenating an empty frame would turn every column into objects)
        collectives = pd.concat([collectives, pd.DataFrame(cpu_colls_rows)], ignore_index=True)
    return {
        "steps": pd.DataFrame(rows, columns=STEP_COLUMNS),
        "collectives": collectives.sort_values("step", kind="stable", ignore_index=True)[COLLECTIVE_COLUMNS],
        "kernel_classes": device.classes.assign(rank=rank.rank)[CLASS_COLUMNS],
        "kernels": kernel_totals(rank.kernels, rank.rank),
        "notes": notes,
    }


def _cpu_collectives_by_step(rank: RankEvents, segmented: Steps) -> dict[int, list[Event]]:
    """The CPU-side collective ops of each step, where the steps' CPU-side spans are known."""
    out: dict[int, list[Event]] = defaultdict(list)
    found = [segmented.cpu_span(i) for i in range(len(segmented.spans))]
    cpu_spans = [span for span in found if span is not None]
    if len(cpu_spans) == len(found):
        cpu_starts = [span[0] for span in cpu_spans]
        for ev in rank.cpu_collectives:
            idx = last_at_or_before(cpu_starts, ev.ts)
            if idx is not None and ev.ts <= cpu_spans[idx][1]:
                out[idx].append(ev)
    return out


def _cpu_collective_rows(
    rank: int, step: int, counted: list[Event], timed: list[Event]
) -> tuple[list[dict], Counter, Counter]:
    """A step's collectives from CPU ops (no device kernels: gloo, or a CPU-only profile): one row each, the
    count by kind and the all-reduces by backend."""
    backends = {found[1] for e in timed if (found := classify_cpu_collective(e.name, e.args))} - {"c10d"}
    kinds: Counter[str] = Counter()
    impls: Counter[str] = Counter()
    rows: list[dict] = []
    for n, ev in enumerate(counted):
        timing = timed[n] if len(timed) == len(counted) else ev
        kind, backend = classify_cpu_collective(ev.name, ev.args) or ("collective", "?")
        backend = "/".join(sorted(backends)) or backend
        kinds[kind] += 1
        if kind == "allreduce":
            impls[backend] += 1
        rows.append(
            {
                "rank": rank,
                "step": step,
                "ordinal": n,
                "kind": kind,
                "impl": backend,
                "name_suffix": None,
                "name": ev.name,
                "start_us": timing.ts,
                "dur_us": timing.dur,
            }
        )
    return rows, kinds, impls


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

    def per_phase(self) -> pd.DataFrame:
        """One row per phase (target, draft, ...): how many steps, the all-reduces of a step (median) and by
        implementation (the most common mix), and the mean per step of communication, compute, idle, exposed
        communication and arrival wait, over steps and ranks: the view of a trace too long to read step by step."""
        if self.steps.empty:
            return pd.DataFrame(columns=PHASE_COLUMNS)
        frame = self.steps.copy()
        timed = ["comm_us", "compute_us", "idle_us", "exposed_comm_us", "comm_wait_us"]
        frame[timed] = frame[timed].astype(float)
        grouped = frame.groupby("phase", sort=False)
        out = pd.DataFrame(
            {
                "steps": grouped["step"].nunique(),
                "ranks": grouped["rank"].nunique(),
                "allreduce_count": grouped["allreduce_count"].median(),
                "allreduce_impls": grouped["allreduce_impls"].agg(lambda s: s.mode().iloc[0] if len(s) else ""),
                **{column: grouped[column].mean() for column in timed},
            }
        )
        return out.reset_index()[PHASE_COLUMNS]

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
    with collector_paused():
        return analyze_rank(load_rank_events(Path(path), rank, marker, bytes_read(slot)), message_bytes)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while one rank is read: the reading creates no reference cycles,
    but each of its full collections walks every event object kept so far (a fifth of the CPU on a 250 MB trace,
    more on larger ones). Restored as it was, whatever happens."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def summarize_traces(
    paths: Sequence[Path | str],
    step_marker: str | None = None,
    message_bytes: int | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> TraceSummary:
    """Summarize one trace per rank (files or folders). Ranks are read in parallel processes; ``progress(read,
    total)`` hears the bytes read across all of them; the first bad file ends the read."""
    if message_bytes is not None and message_bytes <= 0:
        raise TraceError(f"--message-bytes {message_bytes}: bytes per all-reduce must be positive")
    files = expand_paths(paths)
    marker = step_marker or DEFAULT_STEP_MARKER
    try:
        re.compile(marker)
    except re.error as exc:
        raise TraceError(f"--step-marker {marker!r} is not a valid regular expression: {exc}") from None
    ranked = assign_ranks(files)
    for f, _ in ranked:  # a bad byte early in the last rank's file is reported now, not after the others are read
        check_head(f)
    for f, _ in ranked:  # ... and a cut or bad end of it (milliseconds each: the last MiB)
        check_tail(f)
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
    if not colls.empty and (colls["name_suffix"].notna() & (colls["impl"] == "nccl")).any():
        notes.append(
            "NCCL kernel names carry suffixes such as _RING_LL: they are names, not proof of the "
            "algorithm or protocol that ran"
        )
    notes += rank_disagreements(steps) + merged_steps_warnings(steps)
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


MAX_ALLREDUCES_PER_PASS = 4 * 128  # two per layer, of a model of at most 128 layers, twice over (EAGLE-3 + TP)


def merged_steps_warnings(steps: pd.DataFrame) -> list[str]:
    """What the reader must know when the steps cannot be passes: no step marker matched at all, or a step holds
    more all-reduces than any verify pass has (several passes merged into one step: a marker the default does
    not know; give it with --step-marker)."""
    if steps.empty:
        return []
    notes = []
    cut_by = steps["source"].astype(str).str.split("; steps from ").str[-1]
    if not cut_by.str.startswith("step markers").any():
        notes.append(
            f"no step marker matched (steps cut by {cut_by.iloc[0]}): if the trace marks its passes, "
            "name the marker with --step-marker"
        )
    most = int(steps["allreduce_count"].max())
    if most > MAX_ALLREDUCES_PER_PASS:
        notes.append(
            f"a step holds {most:,} all-reduces, more than any verify pass has (at most {MAX_ALLREDUCES_PER_PASS}): "
            "several passes were merged into one step; name the trace's step marker with --step-marker"
        )
    return notes
