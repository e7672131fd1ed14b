"""NCCL's own INFO lines decide the transport: real logs (this project's 2 x H200 probes, public RTX PRO 6000 and
8-GPU PCIe excerpts) and handwritten edge cases."""

from __future__ import annotations

from pathlib import Path

from verifylab.comm.nccl_log import Transport, compact_nccl_log, parse_nccl_log, transport_of
from verifylab.model.inputs.curves import parse_nccl_tests

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl"


def _log(name: str):
    return parse_nccl_log((DATA / name).read_text())


def test_h200_probe_logs_name_the_path_nccl_took():
    p2p, shm, socket = (_log(f"h200-2gpu-{p}.rank0.log") for p in ("p2p", "shm", "socket"))
    assert p2p.dominant_transport is Transport.P2P and p2p.vias == ["P2P/CUMEM"]
    assert shm.dominant_transport is Transport.SHM and shm.environment["NCCL_P2P_DISABLE"] == "1"
    assert socket.dominant_transport is Transport.NET and "NET/Socket/0" in socket.vias
    assert socket.environment["NCCL_SHM_DISABLE"] == "1"
    assert p2p.version == "2.28.9+cuda13.0"
    assert not any(log.mixed for log in (p2p, shm, socket))


def test_tuning_lines_give_the_protocol_per_message_size():
    protocols = _log("h200-2gpu-p2p.rank0.log").protocols_by_size()
    assert protocols[14336] == "LL"  # 1 token x 7168 x 2 bytes
    assert protocols[7340032] == "SIMPLE"  # 512 tokens


def test_public_rtx_pro_6000_line_without_prefix_is_read():
    log = _log("rtx-pro-6000-2gpu-p2p-disabled.txt")
    assert log.dominant_transport is Transport.SHM
    assert [(e.src, e.dst) for e in log.edges] == [(1, 0)]


def test_public_8gpu_pcie_log_is_p2p_direct_pointer():
    log = _log("pcie-8gpu-p2p-direct.txt")
    assert log.dominant_transport is Transport.P2P
    assert log.vias == ["P2P/direct pointer"]
    assert len(log.transports) == 1 and sum(log.transports.values()) == 9


def test_public_nccl_tests_output_parses_to_a_latency_curve():
    curve = parse_nccl_tests((DATA / "rtx-pro-6000-tp2-p2p.all_reduce_perf.txt").read_text(), "p2p", "gardenlinux")
    assert curve.message_bytes[0] == 8 and curve.us[0] == 8.72
    assert max(curve.us) < 10  # a healthy 2-rank PCIe P2P all-reduce of small messages: under 10 us


def test_mixed_transports_and_bus_id_brackets():
    text = "\n".join(
        [
            "h:1:2 [0] NCCL INFO Channel 00/0 : 0[18000] -> 1[34000] via P2P/IPC",
            "h:1:2 [1] NCCL INFO Channel 00/0 : 1[34000] -> 2[b1000] via SHM/direct/direct",
            "h:1:2 [2] NCCL INFO Channel 00/0 : 2[b1000] -> 0[18000] [send] via NET/Socket/1",
            "unrelated line",
        ]
    )
    log = parse_nccl_log(text)
    assert log.mixed
    assert set(log.transports) == {Transport.P2P, Transport.SHM, Transport.NET}
    assert log.edges[0].src_device == "18000"


def test_transport_of_unknown_and_duplicates_collapse():
    assert transport_of("COLLNET/IB") is Transport.NET
    assert transport_of("weird") is Transport.UNKNOWN
    line = "h:1:2 [0] NCCL INFO AllReduce: 14336 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"
    assert compact_nccl_log("\n".join([line] * 5)) == line
    assert parse_nccl_log("").dominant_transport is Transport.UNKNOWN
