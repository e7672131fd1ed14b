"""Stored communication probes as the model reads them: the measured curve through host memory, and the reader's own
box (its whole-set curves and its verdict's regime), from a probe run or a curve file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from verifylab.comm.verdict import whole_set
from verifylab.errors import ModelInputError
from verifylab.model.inputs.curves import BoxProbe, Curve, load_curves, monotone
from verifylab.sources import MeasuredRuns
from verifylab.vocab import COMM_CAMPAIGN_TABLES, Regime

BOX_WORLD = 8  # a probe of the case study's TP size prices the options of the box it ran on


def host_memory_curve(runs: MeasuredRuns) -> tuple[Curve | None, str | None]:
    """The newest measured NCCL curve through host memory: a probe in that regime, else the campaign's shm path."""
    for run_id in sorted(runs.runs_with_table("verdict"), reverse=True):
        verdict = runs.read_table(run_id, "verdict")
        if not verdict.empty and verdict["regime"].iloc[0] == Regime.HOST_MEMORY.value:
            lat = runs.read_table(run_id, "allreduce_latency")
            rows = lat[(lat["impl"] == "nccl") & (lat["mode"] == "graph") & (lat["group"] == "all")]
            rows = rows.dropna(subset=["us"]).sort_values("bytes")
            if not rows.empty:
                return Curve(f"run {run_id}", tuple(rows["bytes"]), monotone(list(rows["us"]))), run_id
    return None, None


def box_probe(runs: MeasuredRuns) -> BoxProbe | None:
    """The newest stored probe (not mechanics only) at the case study's TP size, with its verdict's regime."""
    for run_id in sorted(runs.runs_with_table("verdict"), reverse=True):
        if runs.run(run_id).mechanics_only or probed_world(runs, run_id) != BOX_WORLD:
            continue
        probe = probe_run(runs, run_id)
        if probe is not None:
            return probe
    return None


def probed_world(runs: MeasuredRuns, run_id: str) -> int:
    """How many ranks a stored probe's whole-set verdict judged (0: it has none)."""
    whole = whole_set(runs.read_table(run_id, "verdict"))
    return 0 if whole.empty else int(whole["world"].iloc[0])


def probe_run(runs: MeasuredRuns, run_id: str) -> BoxProbe | None:
    """The box one stored probe measured: its whole-set graph curves (NCCL, fused) and its verdict's regime; None
    when it timed no NCCL all-reduce."""
    whole = whole_set(runs.read_table(run_id, "verdict"))
    lat = runs.read_table(run_id, "allreduce_latency")
    rows = lat[(lat["mode"] == "graph") & (lat["group"] == "all")].dropna(subset=["us"])
    curves = {}
    for impl in ("nccl", "fused"):
        r = rows[rows["impl"] == impl].sort_values("bytes")
        if not r.empty:
            curves[impl] = Curve(f"run {run_id}", tuple(r["bytes"]), monotone(list(r["us"])), impl=impl)
    if "nccl" not in curves or whole.empty:
        return None
    regime = Regime(whole["regime"].iloc[0])
    return BoxProbe(f"run {run_id}", runs.run(run_id).label, regime, curves["nccl"], curves.get("fused"))


def reader_box(runs: MeasuredRuns, latency: str, path: str | None = None) -> BoxProbe:
    """The reader's box from ``--latency``: a stored 8-GPU probe (its curves and verdict), or any curve a file or a
    run holds (a CSV ``path,impl,tokens,us``, nccl-tests output, a campaign's table), read as 8 ranks."""
    is_file = Path(latency).is_file()
    if not is_file and runs.exists(latency) and runs.table_or_none(latency, "verdict") is not None:
        world = probed_world(runs, latency)
        if world != BOX_WORLD:
            raise ModelInputError(
                f"--latency {latency}: that probe measured {world} rank(s); the options here run on "
                f"{BOX_WORLD} GPUs, so they need an {BOX_WORLD}-GPU probe (or a curve file measured at {BOX_WORLD})"
            )
        probe = probe_run(runs, latency)
        if probe is None:
            raise ModelInputError(f"--latency {latency}: that probe timed no NCCL all-reduce across every rank")
        return probe
    where = f"file {latency}" if is_file else f"run {latency}"
    return probe_of_curves(load_curves(latency, runs, path), path, where)


def probe_of_curves(curves: list[Curve], path: str | None, source: str) -> BoxProbe:
    """The box a curve file measured (a CSV or nccl-tests output, read as 8 ranks): its NCCL curve on ``path`` and
    the fused one beside it. A file has no verdict: its regime is unknown, so only what it measured is priced."""
    nccl = [c for c in curves if c.impl == "nccl" and (path is None or c.path == path)]
    if len(nccl) != 1:
        have = ", ".join(sorted({c.path for c in curves if c.impl == "nccl"})) or "none"
        raise ModelInputError(
            f"{source}: {len(nccl)} NCCL curves{f' on path {path!r}' if path else ''} "
            f"(NCCL paths: {have}): name one with --path"
        )
    fused = [c for c in curves if c.impl == "fused" and c.path == nccl[0].path]

    def source_curve(c: Curve) -> Curve:
        return replace(c, source=source, us=monotone(list(c.us)))

    return BoxProbe(
        source,
        f"{nccl[0].path}, read as {BOX_WORLD} ranks",
        Regime.UNKNOWN,
        source_curve(nccl[0]),
        source_curve(fused[0]) if fused else None,
    )


def nccl_eager_over_graph(runs: MeasuredRuns, tokens: int) -> tuple[float, str] | None:
    """NCCL's eager latency over its CUDA-graph one at ``tokens`` on the newest healthy-P2P probe that timed both
    modes there (measured, 2 x H200), with the probe's run id; None where no probe did."""
    for run_id in sorted(runs.runs_with_table("verdict"), reverse=True):
        verdict = runs.read_table(run_id, "verdict")
        if verdict.empty or verdict["regime"].iloc[0] != Regime.HEALTHY_P2P.value:
            continue
        lat = runs.read_table(run_id, "allreduce_latency")
        rows = lat[(lat["impl"] == "nccl") & (lat["group"] == "all") & (lat["tokens"] == tokens)].set_index("mode")
        if {"graph", "eager"} <= set(rows.index):
            return float(rows.loc["eager", "us"] / rows.loc["graph", "us"]), run_id
    return None


def campaign_host_nccl(runs: MeasuredRuns) -> tuple[str, pd.Series] | None:
    """NCCL through host memory (path shm) by tokens, µs, on the newest communication campaign, with its run id
    (None: no campaign is stored)."""
    run_id = runs.newest_with(*COMM_CAMPAIGN_TABLES)
    if run_id is None:
        return None
    lat = runs.read_table(run_id, "allreduce_latency")
    return run_id, lat[(lat["path"] == "shm") & (lat["impl"] == "nccl")].set_index("tokens")["us"]
