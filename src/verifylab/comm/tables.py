"""The probe's tables, made from what its processes wrote: ``allreduce_latency`` (the slowest rank's median per
implementation, group, launch mode and size, rank skew apart), ``p2p_matrix`` (per GPU pair: link, driver P2P
status, peer access, copy latency and bandwidth, NCCL's transport), ``nccl_transport`` (per GPU pair, what NCCL
logged) and ``p2p_host_settings``. Pure functions of a :class:`RawProbe`: the same raw files give the same tables.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

import pandas as pd

from verifylab.comm.host import link_meaning, parse_p2p_status, parse_topology
from verifylab.comm.nccl_log import NcclLog, parse_nccl_log, transport_of
from verifylab.comm.probe import RawProbe
from verifylab.comm.rank_state import WORLD

LATENCY_COLUMNS = [
    "path",
    "impl",
    "group",
    "ranks",
    "mode",
    "tokens",
    "bytes",
    "us",
    "us_slowest_rank",
    "rank_skew_us",
    "slowest_rank",
    "us_min",
    "us_max",
    "replays",
    "rel_err",
    "protocol",
    "note",
]


def nccl_log(raw: RawProbe) -> NcclLog:
    """Every rank's NCCL INFO lines, parsed together."""
    return parse_nccl_log("\n".join(raw.nccl_logs))


def probe_path(raw: RawProbe, log: NcclLog | None = None) -> str:
    """The path the world communicator took, named by NCCL's transport (``p2p``, ``shm``, ``net``), ``mixed``
    when its channels use several, ``gloo`` on CPU."""
    if raw.config.backend == "gloo":
        return "gloo"
    log = log or nccl_log(raw)
    return "mixed" if log.mixed else str(log.dominant_transport)


def _device_key(raw: RawProbe, label: str) -> int | None:
    """A channel line's bracketed device ([0] or a bus id like [18000]) -> CUDA device index."""
    if label.isdigit() and len(label) <= 2:
        return int(label)
    for gpu, bus in raw.host.bus_ids.items():
        if bus.lower().replace(":", "").replace(".", "").lstrip("0").startswith(label.lower().lstrip("0")):
            return gpu
    return None


def latency_table(raw: RawProbe) -> pd.DataFrame:
    """One row per (impl, group, mode, tokens). Every sample starts after a barrier, so the rank that arrives last
    waits for nobody: per sample, the smallest time over the ranks is the collective's own cost and the spread
    over the ranks is arrival skew. ``us`` is the median of the former (the slowest rank's time less its wait),
    ``rank_skew_us`` the median of the latter, ``us_slowest_rank`` the slowest rank's median with the skew in."""
    log = nccl_log(raw)
    path = probe_path(raw, log)
    protocols = log.protocols_by_size()
    cells: dict[tuple, list[tuple[int, dict]]] = defaultdict(list)
    for result in raw.ranks:
        for cell in result["cells"]:
            cells[(cell["impl"], cell["group"], cell["mode"], cell["tokens"])].append((result["rank"], cell))
    rows = []
    for (impl, group, mode, tokens), per_rank in sorted(cells.items()):
        first = per_rank[0][1]
        members = WORLD if group == WORLD else group.split(":", 1)[1]
        row = {
            "path": path,
            "impl": impl,
            "group": group,
            "ranks": raw.world if members == WORLD else len(members.split("-")),
            "mode": mode,
            "tokens": tokens,
            "bytes": first["message_bytes"],
            "protocol": protocols.get(first["message_bytes"], "") if impl == "nccl" and group == WORLD else "",
            "rel_err": max((c["rel_err"] for _, c in per_rank if c["rel_err"] is not None), default=None),
            "note": "; ".join(sorted({c["note"] for _, c in per_rank if c["note"]})),
        }
        timed = {rank: c["samples_us"] for rank, c in per_rank if c["samples_us"]}
        if timed:
            row.update(_skew_apart(timed))
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=LATENCY_COLUMNS)


def _skew_apart(samples: dict[int, list[float]]) -> dict[str, float | int]:
    """Per-sample collective cost (minimum over ranks) and arrival skew (spread over ranks), as medians."""
    n = min(len(s) for s in samples.values())
    cost = [min(s[i] for s in samples.values()) for i in range(n)]
    skew = [max(s[i] for s in samples.values()) - cost[i] for i in range(n)]
    medians = {rank: statistics.median(s) for rank, s in samples.items()}
    slowest = max(medians, key=medians.__getitem__)
    return {
        "us": statistics.median(cost),
        "us_slowest_rank": medians[slowest],
        "rank_skew_us": statistics.median(skew),
        "slowest_rank": slowest,
        "us_min": min(cost),
        "us_max": max(cost),
        "replays": n,
    }


def transport_table(raw: RawProbe) -> pd.DataFrame:
    """Per GPU pair NCCL connected: the transport(s) and 'via' strings it logged, and its channel counts."""
    log = nccl_log(raw)
    by_pair: dict[tuple[int, int], set[tuple[str, int]]] = defaultdict(set)
    for pair, via, channel in _device_edges(raw):  # by device: communicator ranks differ between groups
        by_pair[pair].add((via, channel))
    rows = []
    for (a, b), vias in sorted(by_pair.items()):
        transports = sorted({str(transport_of(v)) for v, _ in vias})
        rows.append(
            {
                "gpu_a": a,
                "gpu_b": b,
                "transport": transports[0] if len(transports) == 1 else "mixed",
                "via": "; ".join(sorted({v for v, _ in vias})),
                "channels": len({c for _, c in vias}),
                "nccl_version": log.version or "",
                "coll_channels": log.coll_channels,
                "environment": "; ".join(f"{k}={v}" for k, v in sorted(log.environment.items())),
            }
        )
    return pd.DataFrame(
        rows,
        columns=["gpu_a", "gpu_b", "transport", "via", "channels", "nccl_version", "coll_channels", "environment"],
    )


def _device_edges(raw: RawProbe) -> list[tuple[tuple[int, int], str, int]]:
    """((gpu a, gpu b) sorted, via, channel) for every channel line whose devices can be resolved."""
    out = []
    for edge in nccl_log(raw).edges:
        a, b = _device_key(raw, edge.src_device), _device_key(raw, edge.dst_device)
        if a is not None and b is not None and a != b:
            out.append(((min(a, b), max(a, b)), edge.via, edge.channel))
    return out


def p2p_matrix_table(raw: RawProbe) -> pd.DataFrame:
    """Per ordered GPU pair: topology link, driver P2P read/write status, peer access, copy latency and
    bandwidth, and the transport NCCL chose between them (from ``nccl_transport``)."""
    links, affinity = parse_topology(raw.host.topology)
    numa = {a.gpu: a.numa for a in affinity}
    reads, writes = parse_p2p_status(raw.host.p2p_read), parse_p2p_status(raw.host.p2p_write)
    transports = {(r.gpu_a, r.gpu_b): r.transport for r in transport_table(raw).itertuples()}
    rows = []
    for p in raw.peers:
        src, dst = p["src"], p["dst"]
        link = links.get((src, dst), "")
        rows.append(
            {
                "src": src,
                "dst": dst,
                "link": link,
                "link_meaning": link_meaning(link) if link else "",
                "same_numa": (numa.get(src) == numa.get(dst)) if numa.get(src) and numa.get(dst) else None,
                "p2p_read": reads.get((src, dst), ""),
                "p2p_write": writes.get((src, dst), ""),
                "can_access_peer": p["can_access_peer"],
                "copy_latency_us": p["copy_latency_us"],
                "copy_bandwidth_gbs": p["copy_bandwidth_gbs"],
                "nccl_transport": transports.get((min(src, dst), max(src, dst)), ""),
            }
        )
    columns = [
        "src",
        "dst",
        "link",
        "link_meaning",
        "same_numa",
        "p2p_read",
        "p2p_write",
        "can_access_peer",
        "copy_latency_us",
        "copy_bandwidth_gbs",
        "nccl_transport",
    ]
    return pd.DataFrame(rows, columns=columns)


def host_settings_table(raw: RawProbe) -> pd.DataFrame:
    """The host's P2P-relevant settings, each with where it was read."""
    return pd.DataFrame(raw.host.settings, columns=["setting", "value", "source", "meaning"])
