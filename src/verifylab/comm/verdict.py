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

from verifylab.comm.bands import Band, Reading, bands_from_public, classify_reading, host_hop_us
from verifylab.comm.rank_state import GROUP_NAME
from verifylab.errors import ManifestError
from verifylab.vocab import DRAFT_TOKENS, KIMI_K2_HIDDEN, Regime, allreduce_message_bytes


def whole_set(verdict: pd.DataFrame) -> pd.DataFrame:
    """The verdict of every rank together (a probe also judges pairs and halves; a probe before those has no
    ``group`` column, and its one row is the whole set's)."""
    return verdict[verdict["group"] == "all"] if "group" in verdict.columns else verdict


REFERENCE_TOKENS = DRAFT_TOKENS[0]  # the verify pass's message at one stream: 4 tokens x 7168 x 2 B = 57 KB
COLLAPSE_RATIO = 3.0  # the full set this many times slower than its slowest pair: the fabric, not the links
STAGED_COPY_RATIO = 0.5  # a pair copying at under half the median pair's bandwidth is staged or on a worse path


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
    refused_paths: str = ""  # implementations that returned wrong sums and were not timed

    def to_row(self) -> dict:
        row = asdict(self)
        row["regime"] = str(self.regime)
        return row


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
    hop = host_hop_us(public)
    wrong = _wrong_paths(latency)
    if "copy_correct" in p2p.columns and (p2p["copy_correct"].astype(str).str.lower() == "false").any():
        wrong.append("peer copies")
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
        reading = classify_reading(us, world, path, bands, hop)
        verdict = _judge(
            reading, world, path, tokens, message, us, eager, latency, transport, p2p, environment, bands, members
        )
        if wrong and group == "all":
            verdict = _refuse_wrong(verdict, wrong)
        verdicts.append(verdict if group == "all" else replace(verdict, group=group))
    return verdicts


def _wrong_paths(latency: pd.DataFrame) -> list[str]:
    """The implementations the ranks refused to time because their result was wrong (``correct`` False)."""
    if "correct" not in latency.columns:
        return []
    bad = latency[latency["correct"].astype(str).str.lower() == "false"]
    return sorted({str(i) for i in bad["impl"]})


def _refuse_wrong(verdict: Verdict, wrong: list[str]) -> Verdict:
    """A verdict for a box where a path returned wrong sums: NCCL wrong is a broken box (degraded, do not serve
    TP); a FlashInfer path wrong keeps that path off, whatever the latencies say."""
    names = ", ".join(wrong)
    if {"nccl", "gloo", "peer copies"} & set(wrong):  # the backend's own all-reduce, or the copies under it
        return replace(
            verdict,
            regime=Regime.DEGRADED,
            reason=f"{names} returned wrong data (checked against the exact result before timing); {verdict.reason}",
            fix_hypothesis="do not serve with tensor parallelism on these GPUs until NCCL's result is right: check "
            "the driver's P2P path (NCCL_P2P_DISABLE=1 as a test), IOMMU and ACS",
            fix_evidence=f"wrong result on: {names}",
            refused_paths=names,
        )
    return replace(
        verdict,
        reason=f"{verdict.reason}; {names} returned wrong sums and were not timed",
        fix_hypothesis=f"keep {names} off (a path that returns wrong data ruins speculative acceptance); "
        f"{verdict.fix_hypothesis}",
        fix_evidence="; ".join(x for x in (f"wrong result on: {names}", verdict.fix_evidence) if x),
        refused_paths=names,
    )


def _fmt_band(band: Band | None) -> tuple[str, str]:
    if band is None:
        return "nothing to compare with", ""
    return f"{band.regime.value}, {band.world} ranks: up to {band.high_us:.0f} us ({band.basis})", ", ".join(
        band.evidence
    )


def _judge(
    reading: Reading,
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
    """The reading's regime, refined by what else the probe saw (pairs and halves, copies per pair, the
    environment), with the one change to try first."""

    def verdict(regime: Regime, reason: str, fix: str, fix_evidence: str) -> Verdict:
        text, evidence = _fmt_band(reading.band)
        return Verdict(world, regime, path, tokens, message, us, eager, text, evidence, reason, fix, fix_evidence)

    regime = reading.regime
    if regime is Regime.NOT_APPLICABLE:
        return verdict(regime, reading.why, "none", "")
    if regime is Regime.UNKNOWN:
        return verdict(
            regime,
            reading.why,
            "run `verifylab comm probe` again on this box (NCCL's INFO lines name the transport)",
            "no channel lines in NCCL's log" if path not in ("p2p",) else "no all-reduce measured",
        )
    p2p_off = env.get("NCCL_P2P_DISABLE", "0") not in ("", "0")
    shm_off = env.get("NCCL_SHM_DISABLE", "0") not in ("", "0")
    refused = p2p[~p2p["can_access_peer"].astype(bool)] if not p2p.empty else p2p
    refused_text = ", ".join(f"{r.src}->{r.dst}" for r in refused.itertuples()) if not refused.empty else ""
    if regime is Regime.SOCKET:
        if p2p_off and shm_off:
            fix = "unset NCCL_P2P_DISABLE and NCCL_SHM_DISABLE: NCCL then uses P2P (or at least host memory)"
            evidence = "NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 in the probe's environment"
        else:
            fix = (
                "give the processes a shared /dev/shm (a container needs --ipc=host or a large --shm-size) so NCCL "
                "can at least use host memory; then find why P2P is off"
            )
            evidence = "NCCL chose its network transport between GPUs of one host"
        return verdict(regime, reading.why, fix, evidence)
    if regime is Regime.HOST_MEMORY:
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
        return verdict(regime, reading.why, fix, evidence)
    if path == "mixed":
        kinds = ", ".join(f"{r.gpu_a}-{r.gpu_b} {r.transport}" for r in transport.itertuples())
        return verdict(
            Regime.DEGRADED,
            f"NCCL's channels use several transports ({kinds}); {tokens} tokens: "
            f"{f'{us:.1f} us' if us is not None else 'not measured'}",
            "fix the pairs that are not on P2P (see the P2P matrix), then re-probe",
            f"NCCL transport per pair: {kinds}",
        )
    # P2P reported: healthy or degraded by its latency; then the pairs, halves and copies
    reasons: list[str] = [reading.why] if regime is Regime.DEGRADED else []
    fixes: list[str] = []
    evidences: list[str] = []
    if regime is Regime.DEGRADED:
        fixes.append(
            "NCCL is slower than its P2P path should be: dump its topology (NCCL_TOPO_DUMP_FILE=topo.xml) and "
            "graph (NCCL_GRAPH_DUMP_FILE=graph.xml) and check the PCIe switches and NUMA nodes it detected; a "
            "misdetected topology is fixed by NCCL_TOPO_FILE with the right one"
        )
        evidences.append(f"all-reduce above the healthy limit ({reading.band.basis if reading.band else ''})")
    at = f"{us:.1f} us" if us is not None else "not measured"
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
            fixes.insert(
                0,
                "the halves are healthy and the whole set is not: a socket or switch boundary lies between them "
                "(cross-socket P2P, NCCL_P2P_LEVEL, the switch's ACS); or keep TP within a half",
            )
            evidences.insert(0, "halves healthy, full set slow")
        else:
            fixes.insert(
                0,
                "the fabric collapses under all-to-all writes: check the switch's ACS/P2P settings and try "
                "NCCL_P2P_LEVEL or fewer channels (NCCL_MAX_NCHANNELS)",
            )
            evidences.insert(0, "pairs healthy, full set slow")
    slow_pairs = _staged_pairs(p2p if members is None else p2p[p2p["src"].isin(members) & p2p["dst"].isin(members)])
    if slow_pairs:
        reasons.append(
            f"copies between {', '.join(slow_pairs)} run at under {STAGED_COPY_RATIO:.0%} of the median "
            "pair's bandwidth"
        )
        fixes.insert(
            0,
            "those pairs' copies look staged through the host or routed across sockets: check their link "
            "(nvidia-smi topo -m), IOMMU and ACS",
        )
        evidences.insert(0, f"copy bandwidth per pair (P2P matrix): {', '.join(slow_pairs)}")
    p2p_works = not p2p.empty and refused.empty and not slow_pairs
    if regime is Regime.DEGRADED and p2p_works and reasons == [reading.why]:
        return verdict(
            Regime.NCCL_SLOW,
            f"{reading.why}; every pair's peer access is allowed and its copies run at full bandwidth: P2P works, "
            "NCCL's all-reduce alone is slow",
            "a faster collective, not the platform: SGLang's PCIe-IPC all-reduce (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1, "
            "SGLang 0.5.21+ with FlashInfer 0.7.0+) or its custom all-reduce; or NCCL with a graph file "
            "(NCCL_GRAPH_FILE) or a patched NCCL",
            "P2P matrix: peer access on every pair, no staged copy; all-reduce above the healthy limit",
        )
    if reasons:
        return verdict(Regime.DEGRADED, "; ".join(reasons), fixes[0], "; ".join(evidences))
    return verdict(
        Regime.HEALTHY_P2P,
        reading.why,
        "nothing to fix: price the options with the healthy-P2P curves",
        "",
    )


def _group_latencies(latency: pd.DataFrame, tokens: int, prefix: str, within: set[int] | None) -> dict[str, float]:
    """Latency of each measured group of a kind (``pair:``, ``half:``) near ``tokens``, optionally only the
    groups inside ``within`` (a half's own pairs)."""
    rows = latency[latency["group"].astype(str).str.startswith(prefix) & (latency["mode"] == "graph")]
    rows = rows.dropna(subset=["us"])
    odd = [str(g) for g in rows["group"] if not GROUP_NAME.fullmatch(str(g))]
    if odd:
        raise ManifestError(f"allreduce_latency: group {odd[0][:30]!r} is not named as a probe names one ({prefix}0-1)")
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
