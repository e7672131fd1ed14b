"""Which communication regime a box is in, per world size, from a probe's own tables: the transport NCCL chose
(its log), the all-reduce latency at the verify pass's message against public reference bands, the pairs and
halves against the full set, and peer access and copies per pair. Then the one change most likely to help,
worded as a hypothesis with the evidence behind it.

Regimes: healthy P2P, host-memory fallback (NCCL's SHM transport), socket (NCCL's network transport on one
host), degraded (P2P reported but slow: staged through the host, a switch that collapses under all-to-all
writes, a cross-socket path), and not applicable (CPU mechanics).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import pandas as pd

from verifylab.vocab import DRAFT_TOKENS, KIMI_K2_HIDDEN, Regime, allreduce_message_bytes

REFERENCE_TOKENS = DRAFT_TOKENS[0]  # the verify pass's message at one stream: 4 tokens x 7168 x 2 B = 57 KB
COLLAPSE_RATIO = 3.0  # the full set this many times slower than its slowest pair: the fabric, not the links
STAGED_COPY_RATIO = 0.5  # a pair copying at under half the median pair's bandwidth is staged or on a worse path


@dataclass(frozen=True)
class Band:
    """What public measurements put an all-reduce at, for one regime and world size, near the reference size."""

    regime: Regime
    world: int
    low_us: float
    high_us: float
    evidence: tuple[str, ...]  # public-evidence row ids

    def holds(self, us: float) -> bool:
        return self.low_us <= us <= self.high_us


@dataclass(frozen=True)
class Verdict:
    """The regime of one world size, the numbers that decided it, and the one change to try first."""

    world: int
    regime: Regime
    transport: str
    reference_tokens: int
    reference_bytes: int
    allreduce_us: float | None
    allreduce_eager_us: float | None
    band: str
    band_evidence: str
    reason: str
    fix_hypothesis: str
    fix_evidence: str
    group: str = "all"

    def to_row(self) -> dict:
        row = asdict(self)
        row["regime"] = str(self.regime)
        return row


def bands_from_public(public: pd.DataFrame | None, message_bytes: float) -> list[Band]:
    """Reference bands per (regime, world): the min-max of public NCCL all-reduce latencies within 4x of the
    message size, measured on PCIe boxes, with the rows that gave them."""
    if public is None or public.empty:
        return []
    rows = public[
        (public["unit"] == "us")
        & public["regime"].isin([r.value for r in Regime])
        & public["implementation"].astype(str).str.startswith("nccl")
        & (public["message_bytes"] >= message_bytes / 4)
        & (public["message_bytes"] <= message_bytes * 4)
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


def _at(latency: pd.DataFrame, impl: str, group: str, mode: str, tokens: int) -> float | None:
    rows = latency[(latency["impl"] == impl) & (latency["group"] == group) & (latency["mode"] == mode)]
    rows = rows.dropna(subset=["us"])
    if rows.empty:
        return None
    exact = rows[rows["tokens"] == tokens]
    if not exact.empty:
        return float(exact["us"].iloc[0])
    nearest = rows.iloc[(rows["tokens"] - tokens).abs().argsort()[:1]]
    return float(nearest["us"].iloc[0])


def _nearest_tokens(latency: pd.DataFrame, tokens: int) -> int:
    sizes = sorted(set(latency["tokens"]))
    return min(sizes, key=lambda t: abs(t - tokens)) if sizes else tokens


def decide(
    latency: pd.DataFrame,
    transport: pd.DataFrame,
    p2p: pd.DataFrame,
    environment: dict[str, str],
    public: pd.DataFrame | None = None,
    hidden: int = KIMI_K2_HIDDEN,
) -> list[Verdict]:
    """One verdict per world size measured: all ranks and, with more than two ranks, each half (a socket or
    switch boundary between the halves shows up as halves healthy and the whole set not)."""
    world_rows = latency[latency["group"] == "all"]
    if world_rows.empty:
        return []
    path = str(world_rows["path"].iloc[0])
    tokens = _nearest_tokens(world_rows, REFERENCE_TOKENS)
    message = int(allreduce_message_bytes(tokens, hidden))
    bands = bands_from_public(public, message)
    verdicts = []
    halves = sorted({str(g) for g in latency["group"] if str(g).startswith("half:")})
    for group in ["all", *halves]:
        rows = latency[latency["group"] == group]
        world = int(rows["ranks"].iloc[0])
        impl = "gloo" if path == "gloo" else "nccl"
        graph = _at(latency, impl, group, "graph", tokens)
        eager = _at(latency, impl, group, "eager", tokens)
        us = graph if graph is not None else eager
        # the whole set is compared with its pairs and halves; a half with its own pairs
        members = None if group == "all" else {int(r) for r in group.split(":", 1)[1].split("-")}
        verdict = _judge(world, path, tokens, message, us, eager, latency, transport, p2p, environment, bands, members)
        verdicts.append(verdict if group == "all" else replace(verdict, group=group))
    return verdicts


def _band_for(bands: list[Band], regime: Regime, world: int) -> Band | None:
    exact = [b for b in bands if b.regime is regime and b.world == world]
    if exact:
        return exact[0]
    others = sorted((b for b in bands if b.regime is regime), key=lambda b: abs(b.world - world))
    return others[0] if others else None


def _fmt_band(band: Band | None) -> tuple[str, str]:
    if band is None:
        return "no public band for this regime", ""
    return (
        f"{band.regime.value}, {band.world} ranks: {band.low_us:.0f}-{band.high_us:.0f} us (public)",
        ", ".join(band.evidence),
    )


def _judge(
    world: int,
    path: str,
    tokens: int,
    message: int,
    us: float | None,
    eager: float | None,
    latency: pd.DataFrame,
    transport: pd.DataFrame,
    p2p: pd.DataFrame,
    env: dict[str, str],
    bands: list[Band],
    members: set[int] | None = None,
) -> Verdict:
    def verdict(regime: Regime, reason: str, fix: str, fix_evidence: str, band: Band | None = None) -> Verdict:
        text, evidence = _fmt_band(band or _band_for(bands, regime, world))
        return Verdict(world, regime, path, tokens, message, us, eager, text, evidence, reason, fix, fix_evidence)

    if path == "gloo":
        return verdict(
            Regime.NOT_APPLICABLE, "CPU processes (gloo): the mechanics of the probe, no GPU path", "none", ""
        )
    p2p_off = env.get("NCCL_P2P_DISABLE", "0") not in ("", "0")
    shm_off = env.get("NCCL_SHM_DISABLE", "0") not in ("", "0")
    refused = p2p[~p2p["can_access_peer"].astype(bool)] if not p2p.empty else p2p
    refused_text = ", ".join(f"{r.src}->{r.dst}" for r in refused.itertuples()) if not refused.empty else ""
    at = f"{us:.1f} us" if us is not None else "not measured"
    if path == "net":
        if p2p_off and shm_off:
            fix = "unset NCCL_P2P_DISABLE and NCCL_SHM_DISABLE: NCCL then uses P2P (or at least host memory)"
            evidence = "NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 in the probe's environment"
        else:
            fix = (
                "give the processes a shared /dev/shm (a container needs --ipc=host or a large --shm-size) so NCCL "
                "can at least use host memory; then find why P2P is off"
            )
            evidence = "NCCL chose its network transport between GPUs of one host"
        return verdict(
            Regime.SOCKET,
            f"NCCL connected the GPUs through its network transport (socket); all-reduce of {tokens} tokens: {at}",
            fix,
            evidence,
        )
    if path == "shm":
        if p2p_off:
            fix, evidence = "unset NCCL_P2P_DISABLE", "NCCL_P2P_DISABLE=1 in the probe's environment"
        elif refused_text:
            fix = (
                "enable PCIe P2P: IOMMU in passthrough (iommu=pt) or off, ACS redirection off on the bridges "
                "between the GPUs, a driver that allows P2P on this platform"
            )
            evidence = f"cudaDeviceCanAccessPeer refused {refused_text}"
        else:
            fix = "find why NCCL did not choose P2P although CUDA allows it: NCCL_P2P_LEVEL, its topology detection"
            evidence = "peer access allowed on every pair, yet NCCL logged SHM"
        return verdict(
            Regime.HOST_MEMORY,
            f"NCCL moved the all-reduce through host memory (SHM); {tokens} tokens: {at}",
            fix,
            evidence,
        )
    if path == "mixed":
        kinds = ", ".join(f"{r.gpu_a}-{r.gpu_b} {r.transport}" for r in transport.itertuples())
        return verdict(
            Regime.DEGRADED,
            f"NCCL's channels use several transports ({kinds}); {tokens} tokens: {at}",
            "fix the pairs that are not on P2P (see the P2P matrix), then re-probe",
            f"NCCL transport per pair: {kinds}",
        )
    # P2P reported: is it healthy?
    healthy = _band_for(bands, Regime.HEALTHY_P2P, world)
    reasons: list[str] = []
    fixes: list[str] = []
    evidences: list[str] = []
    if healthy is not None and us is not None and us > healthy.high_us * 1.5:
        reasons.append(
            f"P2P reported, but {at} at {tokens} tokens is above the public healthy band "
            f"({healthy.low_us:.0f}-{healthy.high_us:.0f} us at {healthy.world} ranks)"
        )
    subsets = {"pair": _group_latencies(latency, tokens, "pair:", members)}
    if members is None:  # a half is not compared with the halves
        subsets["half"] = _group_latencies(latency, tokens, "half:", None)
    for kind, parts in subsets.items():
        if us is None or not parts or us <= COLLAPSE_RATIO * max(parts.values()):
            continue
        worst = max(parts, key=parts.__getitem__)
        reasons.append(
            f"the set ({at}) is over {COLLAPSE_RATIO:g}x its slowest {kind} ({worst}: {parts[worst]:.1f} us)"
        )
        if kind == "half":
            fixes.append(
                "the halves are healthy and the whole set is not: a socket or switch boundary lies between them "
                "(cross-socket P2P, NCCL_P2P_LEVEL, the switch's ACS); or keep TP within a half"
            )
            evidences.append("halves healthy, full set slow")
        else:
            fixes.append(
                "the fabric collapses under all-to-all writes: check the switch's ACS/P2P settings and try "
                "NCCL_P2P_LEVEL or fewer channels (NCCL_MAX_NCHANNELS)"
            )
            evidences.append("pairs healthy, full set slow")
    slow_pairs = _staged_pairs(p2p if members is None else p2p[p2p["src"].isin(members) & p2p["dst"].isin(members)])
    if slow_pairs:
        reasons.append(
            f"copies between {', '.join(slow_pairs)} run at under {STAGED_COPY_RATIO:.0%} of the median "
            "pair's bandwidth"
        )
        fixes.append(
            "those pairs' copies look staged through the host or routed across sockets: check their link "
            "(nvidia-smi topo -m), IOMMU and ACS"
        )
        evidences.append(f"copy bandwidth per pair (P2P matrix): {', '.join(slow_pairs)}")
    if reasons:
        return verdict(
            Regime.DEGRADED,
            "; ".join(reasons),
            fixes[0] if fixes else "re-check P2P on this platform: P2P may be staged through host memory",
            "; ".join(evidences) or "latency above the healthy band",
        )
    band_note = f" (public healthy band: {healthy.low_us:.0f}-{healthy.high_us:.0f} us)" if healthy else ""
    return verdict(
        Regime.HEALTHY_P2P,
        f"NCCL connected every pair by P2P; {tokens} tokens: {at}{band_note}",
        "nothing to fix: price the options with the healthy-P2P curves",
        "",
        healthy,
    )


def _group_latencies(latency: pd.DataFrame, tokens: int, prefix: str, within: set[int] | None) -> dict[str, float]:
    """Latency of each measured group of a kind (``pair:``, ``half:``) near ``tokens``, optionally only the
    groups inside ``within`` (a half's own pairs)."""
    rows = latency[latency["group"].astype(str).str.startswith(prefix) & (latency["mode"] == "graph")]
    rows = rows.dropna(subset=["us"])
    if within is not None:
        inside = [{int(r) for r in str(g).split(":", 1)[1].split("-")} <= within for g in rows["group"]]
        rows = rows[inside]
    if rows.empty:
        return {}
    rows = rows[rows["tokens"] == _nearest_tokens(rows, tokens)]
    return {str(g).split(":", 1)[1]: float(u) for g, u in zip(rows["group"], rows["us"], strict=True)}


def _staged_pairs(p2p: pd.DataFrame) -> list[str]:
    if p2p.empty or len(p2p) < 3:
        return []
    median = float(p2p["copy_bandwidth_gbs"].median())
    slow = p2p[p2p["copy_bandwidth_gbs"] < STAGED_COPY_RATIO * median]
    return [f"{r.src}->{r.dst}" for r in slow.itertuples()]


def verdict_table(verdicts: list[Verdict]) -> pd.DataFrame:
    return pd.DataFrame([v.to_row() for v in verdicts])
