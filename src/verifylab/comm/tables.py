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
    "correct",
    "algbw_gbs",
    "busbw_gbs",
    "algorithm",
    "protocol",
    "nccl_channels",
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
    tuning = log.tuning_by_size()
    cells: dict[tuple, list[tuple[int, dict]]] = defaultdict(list)
    for result in raw.ranks:
        for cell in result["cells"]:
            cells[(cell["impl"], cell["group"], cell["mode"], cell["tokens"])].append((result["rank"], cell))
    rows = []
    for (impl, group, mode, tokens), per_rank in sorted(cells.items()):
        first = per_rank[0][1]
        members = WORLD if group == WORLD else group.split(":", 1)[1]
        ranks = raw.world if members == WORLD else len(members.split("-"))
        choice = tuning.get(first["message_bytes"]) if impl == "nccl" and group == WORLD else None
        checks = [c.get("correct") for _, c in per_rank if c.get("correct") is not None]
        row = {
            "path": path,
            "impl": impl,
            "group": group,
            "ranks": ranks,
            "mode": mode,
            "tokens": tokens,
            "bytes": first["message_bytes"],
            "algorithm": choice.algorithm if choice else "",
            "protocol": choice.protocol if choice else "",
            "nccl_channels": choice.channels if choice else None,
            "rel_err": max((c["rel_err"] for _, c in per_rank if c["rel_err"] is not None), default=None),
            "correct": all(checks) if checks else None,  # any rank's wrong result makes the cell wrong
            "note": "; ".join(sorted({c["note"] for _, c in per_rank if c["note"]})),
        }
        timed = {rank: c["samples_us"] for rank, c in per_rank if c["samples_us"]}
        if timed:
            row.update(_skew_apart(timed))
            row.update(nccl_tests_terms(first["message_bytes"], row["us"], ranks))
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=LATENCY_COLUMNS)


def nccl_tests_terms(message_bytes: float, us: float, ranks: int) -> dict[str, float]:
    """The bandwidths nccl-tests prints for an all-reduce: algbw = bytes / time, busbw = algbw x 2(n-1)/n (what
    each link carries in a ring, comparable across rank counts; 0 for one rank, which moves nothing)."""
    algbw = message_bytes / us / 1e3 if us > 0 else float("nan")
    return {"algbw_gbs": algbw, "busbw_gbs": algbw * 2 * (ranks - 1) / ranks}


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
    device_of = {m["rank"]: m["cuda_device"] for m in raw.gpu_map}
    nvml = {(device_of.get(q["src"]), device_of.get(q["dst"])): q for q in raw.gpu_pairs}
    rows = []
    for p in raw.peers:
        src, dst = p["src"], p["dst"]
        pair = nvml.get((src, dst), {})
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
                "copy_correct": p.get("copy_correct"),
                "nccl_transport": transports.get((min(src, dst), max(src, dst)), ""),
                "nvml_p2p_read": pair.get("nvml_p2p_read", ""),
                "nvml_p2p_write": pair.get("nvml_p2p_write", ""),
                "nvml_path": pair.get("nvml_path", ""),
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
        "copy_correct",
        "nccl_transport",
        "nvml_p2p_read",
        "nvml_p2p_write",
        "nvml_path",
    ]
    return pd.DataFrame(rows, columns=columns)


RANK_MAP_COLUMNS = [
    "rank",
    "cuda_device",
    "nvml_index",
    "name",
    "uuid",
    "pci_bus_id",
    "numa_node",
    "pcie_link",
    "pcie_link_max",
    "nccl_version",
    "source",
]


def rank_map_table(raw: RawProbe) -> pd.DataFrame:
    """Per rank: which physical GPU it ran on (CUDA device, NVML index, UUID, PCI bus id, NUMA node, PCIe link)."""
    return pd.DataFrame(raw.gpu_map).reindex(columns=RANK_MAP_COLUMNS)


def nccl_graph_table(raw: RawProbe) -> pd.DataFrame:
    """The graphs NCCL searched (pattern, channels, planned GB/s per channel, the path type it found between GPUs)
    and its version: a PCIe box whose GPUs share a switch but whose graph says PHB or SYS was misdetected."""
    log = nccl_log(raw)
    rows = [
        {"pattern": g.pattern, "channels": g.channels, "bw_gbs": g.bw_gbs, "path_type": g.path_type}
        for g in dict.fromkeys(log.graphs)
    ]
    frame = pd.DataFrame(rows, columns=["pattern", "channels", "bw_gbs", "path_type"])
    frame["nccl_version"] = log.version or ""
    return frame


def host_settings_table(raw: RawProbe) -> pd.DataFrame:
    """The host's P2P-relevant settings, each with where it was read."""
    return pd.DataFrame(raw.host.settings, columns=["setting", "value", "source", "meaning"])
