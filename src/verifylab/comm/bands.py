"""What one all-reduce reading says at one world size: the public reference bands (same world size only, finite
rows only), the slowest reading that is still healthy P2P there, and the regime of any reading given the transport
NCCL logged. Every finite positive reading gets exactly one answer; a missing transport is never healthy."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from verifylab.vocab import Regime

HEALTHY_TOLERANCE = 1.5  # a P2P reading up to this many times the top of the public healthy band is healthy
HOST_HOP_US = 14.0  # one hop through host memory when the public table lacks its row (pub-41 carries it)
MAX_WORLD = 1024  # ranks: more than one host's GPUs, far fewer than a mistyped number
NCCL_SUBSYS_NEEDED = "INIT,P2P,SHM,NET,GRAPH"  # the subsystems whose INFO lines carry the channels' transports


@dataclass(frozen=True)
class Band:
    """What public measurements put an all-reduce at, for one regime and world size, near the reference size."""

    regime: Regime
    world: int
    low_us: float
    high_us: float
    evidence: tuple[str, ...]  # public-evidence row ids
    basis: str = "public NCCL all-reduce latencies"

    def holds(self, us: float) -> bool:
        return self.low_us <= us <= self.high_us


@dataclass(frozen=True)
class Reading:
    """What one all-reduce latency says at one world size, given the transport NCCL logged: the regime, why, and
    the band it was compared with (None: nothing to compare)."""

    regime: Regime
    why: str
    band: Band | None = None


def check_reading(us: float | None, world: int, what: str = "all-reduce latency") -> None:
    """:class:`ValueError` naming the value when a reading cannot be judged: a latency that is not a finite
    positive number of microseconds, a world size that is not 1 to :data:`MAX_WORLD` ranks."""
    if isinstance(world, bool) or not isinstance(world, int | np.integer) or not 1 <= int(world) <= MAX_WORLD:
        raise ValueError(f"world size {world!r}: a whole number of ranks from 1 to {MAX_WORLD}")
    if us is not None and not (isinstance(us, int | float | np.number) and math.isfinite(us) and us > 0):
        raise ValueError(f"{what} {us!r} us at {world} ranks: a finite number of microseconds > 0")


def bands_from_public(public: pd.DataFrame | None, message_bytes: float) -> list[Band]:
    """Reference bands per (regime, world): the min-max of public NCCL all-reduce latencies within 4x of the
    message size, measured on PCIe boxes, with the rows that gave them; rows whose value or size is not a finite
    positive number are left out (one ``inf`` would open a band to infinity)."""
    if public is None or public.empty:
        return []
    values = pd.to_numeric(public["value"], errors="coerce")
    sizes = pd.to_numeric(public["message_bytes"], errors="coerce")
    rows = public[
        (public["unit"] == "us")
        & public["regime"].isin([r.value for r in Regime])
        & public["implementation"].astype(str).str.startswith("nccl")
        & np.isfinite(values)
        & (values > 0)
        & np.isfinite(sizes)
        & (sizes >= message_bytes / 4)
        & (sizes <= message_bytes * 4)
    ]
    bands = []
    for (regime, world), group in rows.groupby(["regime", "world_size"]):
        bands.append(
            Band(
                Regime(regime),
                int(world),
                float(group["value"].min()),
                float(group["value"].max()),
                tuple(str(i) for i in group["id"]),
            )
        )
    return bands


def host_hop_us(public: pd.DataFrame | None) -> tuple[float, str]:
    """One GPU-to-GPU hop through host memory (public), with its row id: the fastest step a ring through host
    memory can take."""
    if public is not None and not public.empty and {"implementation", "transport"} <= set(public.columns):
        rows = public[(public["implementation"] == "gpu_to_gpu_latency") & (public["transport"] == "SHM")]
        values = pd.to_numeric(rows["value"], errors="coerce")
        rows = rows[np.isfinite(values) & (values > 0)]
        if not rows.empty:
            return float(rows["value"].iloc[0]), str(rows["id"].iloc[0])
    return HOST_HOP_US, ""


def healthy_limit(bands: list[Band], world: int, hop: tuple[float, str]) -> Band:
    """The slowest reading that is still healthy P2P at ``world`` ranks, as a band from 0: the public healthy band
    at that world size x :data:`HEALTHY_TOLERANCE`; where no public band exists at that size, the fastest a ring
    through host memory could be (2(n-1) hops at the public hop latency): P2P slower than that is worse than host
    memory would be."""
    same = [b for b in bands if b.regime is Regime.HEALTHY_P2P and b.world == world]
    if same:
        band = same[0]
        return replace(
            band,
            low_us=0.0,
            high_us=band.high_us * HEALTHY_TOLERANCE,
            basis=f"public healthy band at {world} ranks ({band.low_us:.0f}-{band.high_us:.0f} us) x "
            f"{HEALTHY_TOLERANCE:g}",
        )
    us, row = hop
    steps = 2 * (world - 1)
    return Band(
        Regime.HEALTHY_P2P,
        world,
        0.0,
        steps * us,
        (row,) if row else (),
        f"no public band at {world} ranks: a ring through host memory takes at least {steps} hops x {us:g} us",
    )


def classify_reading(
    us: float | None, world: int, transport: str, bands: list[Band], hop: tuple[float, str] = (0.0, "")
) -> Reading:
    """The regime of one reading: every finite positive latency at every world size gets one answer, and a reading
    is never healthy when the log lacks the transport or nothing was measured. ``transport`` is the path NCCL
    logged (``p2p``, ``shm``, ``net``, ``mixed``, ``unknown``, ``gloo``)."""
    check_reading(us, world)
    hop = hop if hop[0] > 0 else (HOST_HOP_US, "")
    at = f"{us:.1f} us" if us is not None else "not measured"
    if transport == "gloo":
        return Reading(Regime.NOT_APPLICABLE, "CPU processes (gloo): the mechanics of the probe, no GPU path")
    if world == 1:
        return Reading(Regime.NOT_APPLICABLE, "one GPU: tensor parallelism of 1 has no all-reduce to judge")
    if transport == "net":
        return Reading(Regime.SOCKET, f"NCCL connected the GPUs through its network transport (socket); {at}")
    if transport == "shm":
        return Reading(Regime.HOST_MEMORY, f"NCCL moved the all-reduce through host memory (SHM); {at}")
    if transport == "mixed":
        return Reading(Regime.DEGRADED, f"NCCL's channels use several transports; {at}")
    limit = healthy_limit(bands, world, hop)
    if transport != "p2p":
        where = (
            ""
            if us is None
            else (
                f"; {at} is {'within' if us <= limit.high_us else 'above'} what healthy P2P takes at {world} ranks "
                f"(up to {limit.high_us:.0f} us: {limit.basis})"
            )
        )
        return Reading(
            Regime.UNKNOWN,
            "NCCL logged no channel lines, so its transport is unknown (run the probe again: it sets NCCL_DEBUG=INFO "
            f"and NCCL_DEBUG_SUBSYS={NCCL_SUBSYS_NEEDED}){where}",
            limit,
        )
    if us is None:
        return Reading(Regime.UNKNOWN, "P2P logged, but no all-reduce was measured at the reference size", limit)
    if us <= limit.high_us:
        return Reading(
            Regime.HEALTHY_P2P,
            f"NCCL connected every pair by P2P; {at} (healthy up to {limit.high_us:.0f} us: {limit.basis})",
            limit,
        )
    degraded = [b for b in bands if b.regime is Regime.DEGRADED and b.world == world]
    seen = (
        f"; public P2P slowed by topology misdetection at {world} ranks: {degraded[0].low_us:.0f}-"
        f"{degraded[0].high_us:.0f} us ({', '.join(degraded[0].evidence)})"
        if degraded
        else ""
    )
    return Reading(
        Regime.DEGRADED,
        f"P2P reported, but {at} is slower than healthy P2P at {world} ranks (up to {limit.high_us:.0f} us: "
        f"{limit.basis}){seen}",
        limit,
    )


P2P_KERNELS = ("pcie_ipc", "custom_pcie")  # all-reduce kernels that run only where every pair's P2P works
TIME_UNITS_US = {"us": 1.0, "ms": 1e3}


def regime_label_problems(public: pd.DataFrame) -> list[str]:
    """Each public NCCL all-reduce row whose regime label the book's own rules contradict: a row labelled healthy P2P
    slower than :func:`healthy_limit` at its world size (the healthy band of the other sources' rows within 4x of its
    message x :data:`HEALTHY_TOLERANCE`), and a row labelled degraded (P2P staged or broken) from a source whose same
    host ran a P2P kernel (:data:`P2P_KERNELS`: its P2P works, so its NCCL is slow). One line per row, naming it."""
    if public is None or public.empty:
        return []
    problems = []
    scale = public["unit"].map(TIME_UNITS_US)
    values = pd.to_numeric(public["value"], errors="coerce") * scale
    sizes = pd.to_numeric(public["message_bytes"], errors="coerce")
    nccl = public["implementation"].astype(str).str.startswith("nccl") & (public["transport"] == "P2P")
    p2p_sources = set(public.loc[public["implementation"].isin(P2P_KERNELS), "url"])
    for i in public.index[nccl & values.notna() & sizes.notna()]:
        row = public.loc[i]
        if row["regime"] == Regime.HEALTHY_P2P.value:
            others = bands_from_public(public[public["url"] != row["url"]], float(sizes[i]))  # other sources
            same = [b for b in others if b.regime is Regime.HEALTHY_P2P and b.world == int(row["world_size"])]
            if same and values[i] > same[0].high_us * HEALTHY_TOLERANCE:
                problems.append(
                    f"{row['id']}: labelled {Regime.HEALTHY_P2P.value} at {values[i]:.1f} us, slower than the healthy "
                    f"limit {same[0].high_us * HEALTHY_TOLERANCE:.1f} us at {int(row['world_size'])} ranks "
                    f"({', '.join(same[0].evidence)} x {HEALTHY_TOLERANCE:g})"
                )
        elif row["regime"] == Regime.DEGRADED.value and row["url"] in p2p_sources:
            problems.append(
                f"{row['id']}: labelled {Regime.DEGRADED.value} (P2P staged or broken) but its source ran a P2P "
                f"kernel on the same box: {Regime.NCCL_SLOW.value}"
            )
    return problems
