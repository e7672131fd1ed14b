"""What NCCL says it chose, read from its own ``NCCL_DEBUG=INFO`` lines: the transport of every channel edge
(P2P/CUMEM, P2P/IPC, P2P/direct pointer, SHM, NET/Socket, NET/IB), channel counts, the protocol and algorithm of
each collective size (``NCCL_DEBUG_SUBSYS`` with TUNING), and what the environment turned off.

The kernel name in a trace (``..._RING_LL``) proves nothing about the protocol that ran; these lines do.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum


class Transport(StrEnum):
    """How two ranks' buffers are connected, coarsest first in trust: P2P (direct GPU-to-GPU), SHM (through
    host memory), NET (a network transport, sockets or InfiniBand, even on one host)."""

    P2P = "p2p"
    SHM = "shm"
    NET = "net"
    UNKNOWN = "unknown"


ALGORITHMS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
PROTOCOLS = ("LL", "LL128", "SIMPLE")

_PREFIX = r"^(?:\[\d+\]\s+)?(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+)\s+\[(?P<dev>\d+)\]\s+NCCL INFO\s+"
_CHANNEL = re.compile(
    r"Channel\s+(?P<channel>\d+)(?:/\d+)?\s*:\s*(?P<src>\d+)\[(?P<src_dev>[\da-fx]+)\]\s*->\s*"
    r"(?P<dst>\d+)\[(?P<dst_dev>[\da-fx]+)\]\s*(?:\[(?P<dir>send|receive)\]\s*)?via\s+(?P<via>.+?)\s*$"
)
_CHANNELS = re.compile(r"(?P<coll>\d+) coll channels,.*?(?P<nvls>\d+) nvls channels,\s*(?P<p2p>\d+) p2p channels")
_VERSION = re.compile(r"NCCL version (?P<version>[\w.+-]+)")
_INIT = re.compile(r"rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cuda>\d+).*?busId (?P<bus>[\da-fA-F]+)")
_TUNING = re.compile(
    r"(?:(?P<coll>[A-Za-z]+):\s+)?(?P<bytes>\d+) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)"
    r"(?:\s+channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\})?"
)
_GRAPH = re.compile(
    r"Pattern (?P<pattern>\d+), crossNic \d+, nChannels (?P<channels>\d+), bw (?P<bw>[\d.]+)/(?P<bw_inter>[\d.]+), "
    r"type (?P<type>[A-Z]+)/(?P<type_inter>[A-Z]+)"
)
_ENV = re.compile(r"(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>\S+)")
_NO_P2P = re.compile(r"(Could not enable P2P|P2P is disabled|peer access is not supported|P2P not supported)", re.I)


@dataclass(frozen=True)
class ChannelEdge:
    """One channel's connection from rank ``src`` to rank ``dst``, as NCCL logged it."""

    channel: int
    src: int
    dst: int
    via: str
    src_device: str = ""  # the bracketed device: a CUDA index ([0]) or, in some versions, a bus id ([18000])
    dst_device: str = ""

    @property
    def transport(self) -> Transport:
        return transport_of(self.via)


@dataclass(frozen=True)
class TuningChoice:
    """The algorithm and protocol NCCL's tuner picked for one collective size (TUNING lines)."""

    collective: str
    message_bytes: int
    algorithm: str
    protocol: str
    channels: int | None = None  # how many channels the collective used (its channel{Lo..Hi} range)


@dataclass(frozen=True)
class GraphChoice:
    """One graph NCCL searched for a communicator (GRAPH lines): its pattern, channels, the bandwidth it planned
    per channel (GB/s) and the path type it found between GPUs (NVL, PIX, PXB, PHB, SYS: PHB or SYS between GPUs
    on one switch is the misdetection that slows P2P)."""

    pattern: int
    channels: int
    bw_gbs: float
    path_type: str


@dataclass
class NcclLog:
    """Everything the probe reads from one communicator's INFO lines (all ranks' lines together)."""

    version: str | None = None
    edges: list[ChannelEdge] = field(default_factory=list)
    coll_channels: int | None = None
    nvls_channels: int | None = None
    p2p_channels: int | None = None
    nranks: int | None = None
    tuning: list[TuningChoice] = field(default_factory=list)
    graphs: list[GraphChoice] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    p2p_refusals: list[str] = field(default_factory=list)
    lines: int = 0
    long_lines: int = 0  # lines over MAX_LINE characters: not NCCL's, skipped unread

    @property
    def transports(self) -> Counter[Transport]:
        """Channel edges per transport (distinct edges: a channel logged by both ends counts once)."""
        distinct = {(e.channel, e.src, e.dst, transport_of(e.via)) for e in self.edges}
        return Counter(t for *_, t in distinct)

    @property
    def vias(self) -> list[str]:
        """The distinct 'via ...' strings, as NCCL wrote them."""
        return sorted({e.via for e in self.edges})

    @property
    def dominant_transport(self) -> Transport:
        """The transport of most channel edges; UNKNOWN when no channel line was logged."""
        counts = self.transports
        return counts.most_common(1)[0][0] if counts else Transport.UNKNOWN

    @property
    def mixed(self) -> bool:
        """True when channel edges use more than one transport (a P2P pair beside a host-memory one)."""
        return len(self.transports) > 1

    def protocols_by_size(self, collective: str = "AllReduce") -> dict[int, str]:
        """Protocol per message size from TUNING lines (the last logged wins)."""
        return {b: t.protocol for b, t in self.tuning_by_size(collective).items()}

    def tuning_by_size(self, collective: str = "AllReduce") -> dict[int, TuningChoice]:
        """NCCL's choice (algorithm, protocol, channels) per message size from TUNING lines (the last logged
        wins)."""
        return {
            t.message_bytes: t for t in self.tuning if not t.collective or t.collective.lower() == collective.lower()
        }


def transport_of(via: str) -> Transport:
    """The transport class of a ``via`` string: ``P2P/CUMEM/read`` -> P2P, ``SHM/direct/direct`` -> SHM, ..."""
    head = via.strip().split("/", 1)[0].upper()
    if head == "P2P":
        return Transport.P2P
    if head == "SHM":
        return Transport.SHM
    if head in {"NET", "COLLNET"}:
        return Transport.NET
    return Transport.UNKNOWN


def _name(table: tuple[str, ...], token: str) -> str:
    return table[int(token)] if token.isdigit() and int(token) < len(table) else token.upper()


def _body(line: str) -> str | None:
    """The message of an INFO line (``host:pid:tid [dev] NCCL INFO <message>``); a bare message quoted without
    its prefix (``Channel 00 : 1[1] -> 0[0] via SHM/direct/direct``) is read too; other lines give None."""
    match = re.match(_PREFIX, line)
    if match:
        return line[match.end() :]
    stripped = line.strip()
    if "NCCL INFO" in stripped:
        return stripped.split("NCCL INFO", 1)[1].strip()
    if stripped.startswith("Channel") and " via " in stripped:
        return stripped
    return None


def compact_nccl_log(text: str) -> str:
    """The log without repeated lines (each eager collective logs its TUNING line again): the parse is the same."""
    return "\n".join(dict.fromkeys(text.splitlines()))


MAX_LINE = 4096  # NCCL's INFO lines are under 300 characters; a longer line is not one, and is never matched


def parse_nccl_log(text: str) -> NcclLog:
    """Parse ``NCCL_DEBUG=INFO`` output (one or several ranks' lines, any order; other lines ignored). Linear in
    the text: a line longer than :data:`MAX_LINE` is counted in ``long_lines`` and never given to a pattern."""
    log = NcclLog()
    for raw in text.splitlines():
        if len(raw) > MAX_LINE:
            log.long_lines += 1
            continue
        body = _body(raw)
        if body is None:
            continue
        log.lines += 1
        if (m := _CHANNEL.search(body)) is not None:
            log.edges.append(
                ChannelEdge(
                    int(m["channel"]), int(m["src"]), int(m["dst"]), m["via"].strip(), m["src_dev"], m["dst_dev"]
                )
            )
        elif (m := _CHANNELS.search(body)) is not None:
            log.coll_channels, log.nvls_channels = int(m["coll"]), int(m["nvls"])
            log.p2p_channels = int(m["p2p"])
        elif (m := _VERSION.search(body)) is not None:
            log.version = m["version"]
        elif (m := _TUNING.search(body)) is not None:
            channels = int(m["hi"]) - int(m["lo"]) + 1 if m["lo"] is not None else None
            log.tuning.append(
                TuningChoice(
                    m["coll"] or "",
                    int(m["bytes"]),
                    _name(ALGORITHMS, m["algo"]),
                    _name(PROTOCOLS, m["proto"]),
                    channels,
                )
            )
        elif (m := _GRAPH.search(body)) is not None:
            log.graphs.append(GraphChoice(int(m["pattern"]), int(m["channels"]), float(m["bw"]), m["type"]))
        elif (m := _ENV.search(body)) is not None:
            log.environment[m["name"]] = m["value"].rstrip(".")
        elif _NO_P2P.search(body):
            log.p2p_refusals.append(body.strip())
        if (m := _INIT.search(body)) is not None and "Init COMPLETE" in body:
            log.nranks = int(m["nranks"])
    return log
