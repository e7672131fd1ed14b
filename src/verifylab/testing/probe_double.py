"""A test double of a stored probe for a box nobody here has: eight RTX PRO 6000 over PCIe in healthy P2P (the case
study's box), written into a scratch data folder so that ``verifylab box --probe`` can be run on it in tests. Marked a
test double in its manifest; its numbers never enter ``data/`` or the book. Its NCCL curve is the public healthy-P2P
rows of that box (the shipped table's NCCL latencies for 8 x RTX PRO 6000, interpolated over the message size);
nothing else is measured (no fused kernel checked: fusion is off by its policy, as a probe without ``--extra``).
Its NCCL-slow variant (``nccl_slowdown``) is the same box with every NCCL latency that many times the public one and
the verdict a probe gives where P2P works and NCCL alone is slow. With ``fused_factor`` the double also holds a fused
all-reduce + RMSNorm curve checked correct (that many times its NCCL latency), as a probe with ``--extra``: its
policy allows fusion."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pandas as pd

from verifylab.iorw import atomic_write_text

RUN_ID = "20261206-000000-8xrtx-pro-6000-probe-double"
GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
WORLD = 8
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
HIDDEN = 7168  # Kimi-K2.5's: the probe's message is tokens x hidden x 2 bytes


def _public_nccl(data_dir: Path) -> list[tuple[float, float]]:
    """(bytes, us) of the public NCCL all-reduce rows for 8 x RTX PRO 6000 in healthy P2P, by size."""
    table = pd.read_csv(data_dir / "reference" / "public_measurements.csv")
    rows = table[
        table["hardware"].str.contains("RTX PRO 6000", na=False)
        & (table["world_size"] == WORLD)
        & (table["regime"] == "healthy P2P")
        & (table["implementation"] == "nccl")
        & (table["unit"] == "us")
    ]
    points = sorted((float(b), float(u)) for b, u in zip(rows["message_bytes"], rows["value"], strict=True))
    if len(points) < 2:
        raise ValueError(f"{data_dir}: fewer than two public NCCL rows for {WORLD} x RTX PRO 6000 (healthy P2P)")
    return points


def _at(points: list[tuple[float, float]], size: float) -> float:
    """``points`` interpolated in log size; past the last, its latency plus the bytes at the last segment's rate."""
    if size <= points[0][0]:
        return points[0][1]
    for (b0, u0), (b1, u1) in itertools.pairwise(points):
        if size <= b1:
            return u0 + (u1 - u0) * (math.log(size) - math.log(b0)) / (math.log(b1) - math.log(b0))
    (b0, u0), (b1, u1) = points[-2], points[-1]
    return u1 + max(u1 - u0, 0.0) / (b1 - b0) * (size - b1)


def write_probe_double(
    data_dir: Path, run_id: str = RUN_ID, nccl_slowdown: float | None = None, fused_factor: float | None = None
) -> str:
    """Write the double's run into ``data_dir/runs`` (a scratch copy of a data folder) and return its id; with
    ``nccl_slowdown``, the NCCL-slow box (P2P works, NCCL's all-reduce that many times the public one); with
    ``fused_factor``, a fused kernel checked correct at that many times its NCCL latency."""
    points = [(b, us * (nccl_slowdown or 1.0)) for b, us in _public_nccl(data_dir)]
    regime = "healthy P2P" if nccl_slowdown is None else "NCCL slow, P2P works"
    slower = "" if nccl_slowdown is None else f", every NCCL latency x {nccl_slowdown:g}"
    fix = (
        "nothing to fix: price the options with the healthy-P2P curves"
        if nccl_slowdown is None
        else "a faster collective, not the platform: SGLang's PCIe-IPC all-reduce (test double)"
    )
    run = data_dir / "runs" / run_id
    run.mkdir(parents=True)
    impls = {"nccl": 1.0, **({"fused": fused_factor} if fused_factor is not None else {})}
    latency = pd.DataFrame(
        [
            {"path": "p2p", "impl": impl, "group": "all", "ranks": WORLD, "mode": mode, "tokens": t,
             "bytes": t * HIDDEN * 2, "us": _at(points, t * HIDDEN * 2) * factor, "correct": True}
            for impl, factor in impls.items()
            for mode in ("eager", "graph")
            for t in TOKENS
        ]
    )  # fmt: skip
    reference = 4 * HIDDEN * 2
    verdict = pd.DataFrame(
        [
            {"world": WORLD, "regime": regime, "transport": "p2p", "reference_tokens": 4,
             "reference_bytes": reference, "allreduce_us": _at(points, reference), "band": f"{regime} (test double)",
             "reason": "a test double: the public healthy-P2P curve of 8 x RTX PRO 6000" + slower,
             "fix_hypothesis": fix, "group": "all", "refused_paths": ""}
        ]
    )  # fmt: skip
    ranks = pd.DataFrame(
        [{"rank": r, "cuda_device": r, "name": GPU_NAME, "source": "test double"} for r in range(WORLD)]
    )
    tables = {"allreduce_latency": latency, "verdict": verdict, "rank_map": ranks}
    for name, frame in tables.items():
        atomic_write_text(run / f"{name}.csv", frame.to_csv(index=False))
    manifest = {
        "schema_version": 3,
        "run_id": run_id,
        "label": f"{WORLD} x RTX PRO 6000 (PCIe), {regime}: a test double, never evidence",
        "created": "2026-12-06T00:00:00+00:00",
        "host": "test double",
        "gpu_name": GPU_NAME,
        "compute_capability": "12.0",
        "gpu_count": WORLD,
        "interconnect": "PCIe",
        "driver": None,
        "cuda": None,
        "versions": {},
        "git_commit": None,
        "campaign": "",
        "kind": "measured",
        "test_double": True,
        "mechanics_only": True,
        "status": "complete",
        "tables": {name: f"{name}.csv" for name in tables},
        "parameters": {"command": "verifylab.testing.probe_double", "world_size": WORLD, "nccl_environment": {}},
        "notes": ["test double: the NCCL curve is the public rows pub-30..pub-40 interpolated; nothing measured"],
    }
    atomic_write_text(run / "manifest.json", json.dumps(manifest, indent=2))
    return run_id
