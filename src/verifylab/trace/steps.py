"""Reading one rank's trace into the events the analysis uses, and cutting it into steps (passes) with a
phase each: from step markers (SGLang's ``step[TARGET_VERIFY bs=2]``, ``draft``, ``draft_extend``, PyTorch's
``ProfilerStep#3``), preferring their GPU-timeline copies, else from CUDA-graph launches, else the whole trace."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from verifylab.errors import TraceError
from verifylab.trace.classify import KERNEL_CATS, classify_cpu_collective
from verifylab.trace.columns import KernelColumns, KernelColumnsBuilder
from verifylab.trace.intervals import outermost
from verifylab.trace.reader import Event, RawEvent, correlation_of, event_time, iter_batches, to_event

# ProfilerStep#3, verify_step#0 / verify_step_0 / verify_step0, draft_extend, SGLang's step[TARGET_VERIFY bs=2]
DEFAULT_STEP_MARKER = (
    r"^(ProfilerStep#\d+|(draft|verify|draft_extend|decode|target)(_step)?[#_]?\d*"
    r"|step\[[A-Z_]+\b[^\]]*\])$"
)
STEP_COLUMNS = [
    "rank",
    "step",
    "phase",
    "span_us",
    "kernel_count",
    "allreduce_count",
    "allgather_count",
    "other_collective_count",
    "comm_us",
    "comm_wait_us",
    "comm_transfer_us",
    "compute_us",
    "idle_us",
    "exposed_comm_us",
    "norm_us",
    "gemm_moe_us",
    "attention_us",
    "bytes_per_allreduce",
    "bytes_source",
    "allreduce_impls",
    "nccl_name_suffixes",
    "source",
]
INF = float("inf")
GRAPH_LAUNCH = re.compile(r"^cudaGraphLaunch")
SGLANG_STEP = re.compile(r"^step\[(?P<mode>[A-Z_]+)\b")
# SGLang's forward modes as phases: a target pass is a verify pass under speculative decoding, a decode otherwise
SGLANG_PHASES = {
    "TARGET_VERIFY": "target",
    "DECODE": "target",
    "EXTEND": "prefill",
    "MIXED": "prefill",
    "DRAFT_EXTEND": "draft_extend",
    "DRAFT_EXTEND_V2": "draft_extend",
    "IDLE": "idle",
}


@dataclass
class RankEvents:
    """The events of one rank's trace that the analysis uses: the device kernels (the bulk) as columns, the
    few others as events."""

    path: Path
    rank: int
    kernels: KernelColumns = field(default_factory=KernelColumns.empty)
    cpu_collectives: list[Event] = field(default_factory=list)
    markers: list[Event] = field(default_factory=list)
    gpu_markers: list[Event] = field(default_factory=list)
    graph_launches: list[Event] = field(default_factory=list)
    event_count: int = 0


def _event(obj: RawEvent, path: Path) -> Event:
    try:
        return to_event(obj)
    except TraceError as exc:
        raise TraceError(f"{path}: {exc}") from None


def _append_kernel(kernels: KernelColumnsBuilder, obj: RawEvent, cat: str, path: Path) -> None:
    ts, dur = obj.ts, obj.dur
    if not (type(ts) is float and type(dur) is float and dur >= 0 and ts - ts == 0 and dur - dur == 0):
        try:  # ints, strings, NaN or a negative duration: the checked path (one line naming the event)
            ts, dur = event_time(obj, "ts"), event_time(obj, "dur")
        except TraceError as exc:
            raise TraceError(f"{path}: {exc}") from None
    kernels.append(str(obj.name if obj.name is not None else ""), cat, ts, dur, correlation_of(obj))


_DROP, _MARKER, _COLLECTIVE, _BY_ARGS = range(4)  # what a CPU op is, by its name alone where that decides it


def _cpu_op_kind(name: str, marker: re.Pattern) -> int:
    """What a CPU op of this name is: a step marker, a collective, one its args decide (record_param_comms), or
    nothing the analysis keeps."""
    if marker.match(name):
        return _MARKER
    if name == "record_param_comms":
        return _BY_ARGS
    return _COLLECTIVE if classify_cpu_collective(name, {}) is not None else _DROP


def load_rank_events(
    path: Path, rank: int, step_marker: str, on_bytes: Callable[[int], None] | None = None
) -> RankEvents:
    """One streaming pass over a trace, keeping kernels, collectives, step markers (CPU and GPU timeline) and
    graph launches; ``on_bytes`` hears the bytes read."""
    marker = re.compile(step_marker)
    out = RankEvents(path, rank)
    kernels = KernelColumnsBuilder()
    codes, add_code, add_ts, add_dur, add_corr = kernels.appenders()
    kind: dict[str, int] = {}  # a CPU op's name -> what it is (names repeat: decided once per name)
    graph: dict[str, bool] = {}  # a runtime call's name -> whether it launches a CUDA graph
    by_cat: dict[object, dict[object, int]] = {}  # a kernel's category -> its name -> code (no tuple per kernel)
    markers, collectives, launches = out.markers, out.cpu_collectives, out.graph_launches
    count = 0
    for batch in iter_batches(path, on_bytes):
        count += len(batch)
        for obj in batch:
            if obj.ph != "X":
                continue
            cat = obj.cat
            if cat in KERNEL_CATS:  # the bulk of a trace: the common case inline, anything odd checked
                ts, dur, args = obj.ts, obj.dur, obj.args
                corr = args.correlation if args is not None else None
                if (
                    type(ts) is float
                    and type(dur) is float
                    and 0 <= dur < INF
                    and -INF < ts < INF
                    and type(corr) is int
                ):
                    name = obj.name if type(obj.name) is str else str(obj.name)  # a list or a number: its text
                    by_name = by_cat.get(cat)
                    if by_name is None:
                        by_name = by_cat[cat] = {}
                    code = by_name.get(name)
                    if code is None:
                        code = codes.get((name, cat))
                        if code is None:
                            code = codes[(name, cat)] = len(codes)
                        by_name[name] = code
                    add_code(code)
                    add_ts(ts)
                    add_dur(dur)
                    add_corr(corr)
                else:
                    _append_kernel(kernels, obj, cat, path)
            elif cat == "cuda_runtime":
                name = obj.name  # a list or a mapping for a name (no dict key) launches no graph
                launch = graph.get(name) if type(name) is str else False
                if launch is None:
                    launch = graph[name] = bool(GRAPH_LAUNCH.match(name))
                if launch:
                    launches.append(_event(obj, path))
            elif cat in ("cpu_op", "user_annotation", "python_function"):
                name = obj.name  # a list or a mapping for a name (no dict key) is nothing the analysis keeps
                what = kind.get(name) if type(name) is str else _DROP
                if what is None:
                    what = kind[name] = _cpu_op_kind(name, marker)
                if what == _MARKER:
                    markers.append(_event(obj, path))
                elif what == _COLLECTIVE:
                    collectives.append(_event(obj, path))
                elif what == _BY_ARGS and classify_cpu_collective(name, (ev := _event(obj, path)).args):
                    collectives.append(ev)
            elif cat == "gpu_user_annotation" and isinstance(obj.name, str) and marker.match(obj.name):
                out.gpu_markers.append(_event(obj, path))
    out.kernels, out.event_count = kernels.finish(), count
    if count == 0:
        raise TraceError(f"{path}: the trace holds no events")
    return out


def phase_of_marker(name: str) -> str:
    """The phase a step marker names: SGLang's ``step[TARGET_VERIFY bs=2]`` -> target, ``step[EXTEND ...]`` ->
    prefill; ``draft_extend`` / ``ProfilerStep#3`` -> the name without its number."""
    sglang = SGLANG_STEP.match(name)
    if sglang:
        return SGLANG_PHASES.get(sglang["mode"], sglang["mode"].lower())
    return re.sub(r"[#_]?\d+$", "", name) or name


@dataclass
class Steps:
    """A rank's steps as (phase, index, start, end), how they were found, whether a kernel must lie inside its
    step's span (GPU-timeline markers) and, for graph replays, kernel correlation id -> step."""

    spans: list[tuple[str, int, float, float]]
    how: str
    bounded: bool = False
    graph_step: dict[int, int] = field(default_factory=dict)
    cpu_spans: list[tuple[float, float]] | None = None  # where CPU-side events of each step lie, if known

    def cpu_span(self, idx: int) -> tuple[float, float] | None:
        if self.cpu_spans is not None:
            return self.cpu_spans[idx]
        return None if self.bounded else self.spans[idx][2:]


def segment_steps(rank: RankEvents) -> Steps:
    """Cut one rank's trace into steps. GPU-timeline markers come first: kernels run after the CPU range that
    launched them, so only the GPU copy holds them; a marker nested in another (the draft model's
    ``step[EXTEND]`` inside ``draft_extend``) belongs to the outer one."""
    if rank.gpu_markers:
        ms = outermost(rank.gpu_markers, same_thread=False)
        spans = [(phase_of_marker(m.name), i, m.ts, m.end) for i, m in enumerate(ms)]
        cpu = outermost(rank.markers, same_thread=False)  # the CPU copies, for CPU-side events (message sizes)
        same = [c.name for c in cpu] == [m.name for m in ms]
        cpu_spans = [(c.ts, c.end) for c in cpu] if same else None
        return Steps(spans, "step markers (GPU timeline)", bounded=True, cpu_spans=cpu_spans)
    if rank.markers:
        ms = sorted(rank.markers, key=lambda e: e.ts)
        return Steps([(phase_of_marker(m.name), i, m.ts, m.end) for i, m in enumerate(ms)], "step markers")
    if rank.graph_launches:
        gl = sorted(rank.graph_launches, key=lambda e: e.ts)
        corr = {int(g.args["correlation"]): i for i, g in enumerate(gl) if "correlation" in g.args}
        return Steps([("graph", i, g.ts, g.end) for i, g in enumerate(gl)], "CUDA-graph launches", graph_step=corr)
    if len(rank.kernels):
        return Steps([("trace", 0, float(rank.kernels.ts.min()), float(rank.kernels.end.max()))], "whole trace")
    if rank.cpu_collectives:
        events = rank.cpu_collectives
        return Steps([("trace", 0, min(e.ts for e in events), max(e.end for e in events))], "whole trace")
    return Steps([], "none")


def label_graph_phases(rows: list[dict]) -> None:
    """Under SGLang's CUDA graphs without step markers: the launches with the most all-reduces are target-model
    passes (verify), the one right after a target pass is the draft-extend, the rest are draft steps. Without
    any all-reduce (TP 1) only size is left: the launches with the most kernels are target passes, the rest
    are labelled "other graph" (a draft model cannot be told apart from other graphs by size alone)."""
    if not rows:
        return
    by_collectives = any(r["allreduce_count"] for r in rows)
    key = "allreduce_count" if by_collectives else "kernel_count"
    top = max(r[key] for r in rows)
    previous_target = False
    for r in rows:
        if top and r[key] == top:
            r["phase"], previous_target = "target", True
        elif by_collectives:
            r["phase"] = "draft_extend" if previous_target else "draft"
            previous_target = False
        else:
            r["phase"] = "other graph"
