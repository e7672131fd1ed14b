"""The regime verdict: on this project's three 2 x H200 probes (P2P, NCCL_P2P_DISABLE=1, + NCCL_SHM_DISABLE=1), on
the public RTX PRO 6000 fixtures, and on handwritten boxes (one bad pair, a NUMA split, mixed transports)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from verifylab.comm.record import probe_tables, read_raw
from verifylab.comm.verdict import Regime, decide
from verifylab.store.public import public_measurements_or_none
from verifylab.store.runs import RunStore

ROOT = Path(__file__).resolve().parents[2]
PROBES = {
    "20261201-092338-2xh200-probe-p2p": Regime.HEALTHY_P2P,
    "20261201-091704-2xh200-probe-shm": Regime.HOST_MEMORY,
    "20261201-091704-2xh200-probe-socket": Regime.SOCKET,
}


@pytest.mark.parametrize(("run_id", "regime"), PROBES.items())
def test_each_measured_probe_is_judged_in_its_regime(run_id: str, regime: Regime):
    store = RunStore(ROOT / "data" / "runs")
    tables = probe_tables(read_raw(store, run_id), public_measurements_or_none(ROOT / "data"))
    verdict = tables.verdict.iloc[0]
    assert verdict["regime"] == regime.value
    assert verdict["world"] == 2
    stored = store.read_table(run_id, "verdict").iloc[0]
    assert stored["regime"] == regime.value  # the stored table says the same


def test_the_fix_names_the_variable_that_caused_the_fallback():
    store = RunStore(ROOT / "data" / "runs")
    shm = probe_tables(read_raw(store, "20261201-091704-2xh200-probe-shm")).verdict.iloc[0]
    assert "NCCL_P2P_DISABLE" in shm["fix_hypothesis"] and "NCCL_P2P_DISABLE=1" in shm["fix_evidence"]
    sock = probe_tables(read_raw(store, "20261201-091704-2xh200-probe-socket")).verdict.iloc[0]
    assert "NCCL_SHM_DISABLE" in sock["fix_hypothesis"]


# ------------------------------------------------------------------------------------------ handwritten boxes
def _latency(world: int, path: str, groups: dict[str, float], tokens: int = 4) -> pd.DataFrame:
    rows = []
    for group, us in groups.items():
        ranks = world if group == "all" else len(group.split(":", 1)[1].split("-"))
        rows.append(
            {"path": path, "impl": "nccl", "group": group, "ranks": ranks, "mode": "graph", "tokens": tokens, "us": us}
        )
    return pd.DataFrame(rows)


def _p2p(world: int, can=lambda a, b: True, gbs=lambda a, b: 50.0) -> pd.DataFrame:
    rows = [
        {"src": a, "dst": b, "can_access_peer": can(a, b), "copy_bandwidth_gbs": gbs(a, b)}
        for a in range(world)
        for b in range(world)
        if a != b
    ]
    return pd.DataFrame(rows)


def _transport(pairs: dict[tuple[int, int], str]) -> pd.DataFrame:
    return pd.DataFrame([{"gpu_a": a, "gpu_b": b, "transport": t} for (a, b), t in pairs.items()])


def _public() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "id": "pub-a",
                "unit": "us",
                "regime": "healthy P2P",
                "implementation": "nccl_ring",
                "world_size": 8,
                "message_bytes": 32768,
                "value": 24.5,
            },
            {
                "id": "pub-b",
                "unit": "us",
                "regime": "healthy P2P",
                "implementation": "nccl_ring",
                "world_size": 8,
                "message_bytes": 65536,
                "value": 26.2,
            },
        ]
    )


def test_healthy_8_ranks_within_the_public_band_cites_it():
    lat = _latency(8, "p2p", {"all": 25.0, "pair:0-1": 9.0, "half:0-1-2-3": 14.0, "half:4-5-6-7": 14.0})
    [whole, *halves] = decide(lat, _transport({(0, 1): "p2p"}), _p2p(8), {}, _public())
    assert whole.regime is Regime.HEALTHY_P2P
    assert whole.band_evidence == "pub-a, pub-b"
    assert [h.group for h in halves] == ["half:0-1-2-3", "half:4-5-6-7"]


def test_case_study_like_205_us_over_working_p2p_is_nccl_slow_not_healthy():
    """#68: P2P healthy pair by pair (peer access, full copy bandwidth) with a slow all-reduce: NCCL alone is slow,
    and the fix is a collective, not the platform."""
    lat = _latency(8, "p2p", {"all": 205.0})
    [whole] = decide(lat, _transport({(0, 1): "p2p"}), _p2p(8), {}, _public())
    assert whole.regime is Regime.NCCL_SLOW
    assert "slower than healthy P2P at 8 ranks" in whole.reason and "P2P works" in whole.reason
    assert "PCIe-IPC" in whole.fix_hypothesis and "NCCL_GRAPH_FILE" in whole.fix_hypothesis


def test_the_same_slow_all_reduce_with_a_refused_or_staged_pair_is_degraded():
    lat = _latency(8, "p2p", {"all": 205.0})
    refused = _p2p(8, can=lambda a, b: {a, b} != {2, 3})
    [whole] = decide(lat, _transport({(0, 1): "p2p"}), refused, {}, _public())
    assert whole.regime is Regime.DEGRADED and "NCCL_TOPO_DUMP_FILE" in whole.fix_hypothesis
    staged = _p2p(8, gbs=lambda a, b: 5.0 if {a, b} == {2, 3} else 50.0)
    [whole] = decide(lat, _transport({(0, 1): "p2p"}), staged, {}, _public())
    assert whole.regime is Regime.DEGRADED and "2->3" in whole.reason
    [whole] = decide(lat, _transport({(0, 1): "p2p"}), _p2p(0), {}, _public())  # no P2P matrix: cannot tell
    assert whole.regime is Regime.DEGRADED


def test_numa_split_halves_healthy_whole_set_slow():
    lat = _latency(8, "p2p", {"all": 180.0, "half:0-1-2-3": 15.0, "half:4-5-6-7": 16.0})
    whole = decide(lat, _transport({(0, 1): "p2p"}), _p2p(8), {})[0]
    assert whole.regime is Regime.DEGRADED
    assert "halves" in whole.fix_hypothesis and "half" in whole.reason


def test_one_bad_pair_copies_staged():
    slow = lambda a, b: 5.0 if {a, b} == {2, 3} else 50.0  # noqa: E731
    lat = _latency(4, "p2p", {"all": 14.0})
    whole = decide(lat, _transport({(0, 1): "p2p"}), _p2p(4, gbs=slow), {})[0]
    assert whole.regime is Regime.DEGRADED
    assert "2->3" in whole.reason and "3->2" in whole.reason


def test_mixed_transports_is_degraded_naming_the_pairs():
    lat = _latency(4, "mixed", {"all": 60.0})
    transport = _transport({(0, 1): "p2p", (1, 2): "shm", (2, 3): "p2p"})
    whole = decide(lat, transport, _p2p(4), {})[0]
    assert whole.regime is Regime.DEGRADED and "1-2 shm" in whole.reason


def test_peer_access_refused_host_memory_points_at_the_platform():
    refuse = lambda a, b: {a, b} != {0, 1}  # noqa: E731
    lat = _latency(2, "shm", {"all": 30.0})
    whole = decide(lat, _transport({(0, 1): "shm"}), _p2p(2, can=refuse), {})[0]
    assert whole.regime is Regime.HOST_MEMORY
    assert "0->1" in whole.fix_evidence and "IOMMU" in whole.fix_hypothesis


# --------------------------------------------------------------------------------------------- public fixtures
DATA = ROOT / "tests" / "data" / "nccl"


def _from_public(log_name: str, perf_name: str | None, world: int, path: str) -> list:
    """A verdict from published RTX PRO 6000 text: NCCL's INFO lines give the transport, nccl-tests' output the
    latency curve (eager, as nccl-tests runs by default)."""
    from verifylab.comm.nccl_log import parse_nccl_log
    from verifylab.model.inputs.curves import parse_nccl_tests

    log = parse_nccl_log((DATA / log_name).read_text())
    assert str(log.dominant_transport) == path
    us = max(parse_nccl_tests((DATA / perf_name).read_text(), path, perf_name).us) if perf_name else float("nan")
    rows = [{"path": path, "impl": "nccl", "group": "all", "ranks": world, "mode": "eager", "tokens": 1, "us": us}]
    transport = _transport({(e.src, e.dst): str(e.transport) for e in log.edges})
    return decide(pd.DataFrame(rows), transport, _p2p(world), {}, public_measurements_or_none(ROOT / "data"))


def test_public_pcie_p2p_log_and_rtx_pro_6000_curve_are_healthy():
    [verdict] = _from_public("pcie-8gpu-p2p-direct.txt", "rtx-pro-6000-tp2-p2p.all_reduce_perf.txt", 2, "p2p")
    assert verdict.regime is Regime.HEALTHY_P2P


def test_public_rtx_pro_6000_p2p_disabled_box_is_host_memory():
    [verdict] = _from_public("rtx-pro-6000-2gpu-p2p-disabled.txt", None, 2, "shm")
    assert verdict.regime is Regime.HOST_MEMORY


# ------------------------------------------------------------------------------------------- every reading
def _readings() -> list[float]:
    """1 us to 10 ms, 60 steps per decade."""
    return [10 ** (i / 60) for i in range(0, 4 * 60 + 1)]


@pytest.mark.parametrize("world", [2, 4, 8])
def test_every_reading_at_every_world_size_gets_one_answer(world: int):
    """A sweep of latencies through every transport: each reading has exactly one regime, healthy only where NCCL
    logged P2P and the latency is within the limit at the same world size, never from a missing transport."""
    from verifylab.comm.bands import bands_from_public, classify_reading, healthy_limit, host_hop_us

    public = public_measurements_or_none(ROOT / "data")
    bands = bands_from_public(public, 57344)
    hop = host_hop_us(public)
    limit = healthy_limit(bands, world, hop)
    assert limit.world == world and limit.high_us > 0
    expected = {"net": Regime.SOCKET, "shm": Regime.HOST_MEMORY, "mixed": Regime.DEGRADED, "unknown": Regime.UNKNOWN}
    for us in _readings():
        for transport, regime in expected.items():
            assert classify_reading(us, world, transport, bands, hop).regime is regime
        p2p = classify_reading(us, world, "p2p", bands, hop)
        assert p2p.regime is (Regime.HEALTHY_P2P if us <= limit.high_us else Regime.DEGRADED), (world, us)
        assert p2p.band is not None and p2p.band.world == world  # compared at its own world size only
    assert classify_reading(None, world, "p2p", bands, hop).regime is Regime.UNKNOWN


def test_a_size_without_a_public_band_says_so_and_uses_the_host_memory_floor():
    from verifylab.comm.bands import bands_from_public, classify_reading, host_hop_us

    public = public_measurements_or_none(ROOT / "data")
    bands, hop = bands_from_public(public, 57344), host_hop_us(public)
    assert not [b for b in bands if b.world == 2 and b.regime is Regime.HEALTHY_P2P]  # none in the table today
    healthy = classify_reading(10.3, 2, "p2p", bands, hop)  # the 2 x H200 NVLink probe
    slow = classify_reading(120.0, 2, "p2p", bands, hop)
    assert healthy.regime is Regime.HEALTHY_P2P and "no public band at 2 ranks" in healthy.why
    assert slow.regime is Regime.DEGRADED and hop[1] in slow.band.evidence


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), 0.0, -3.0])
def test_a_non_finite_or_non_positive_reading_is_refused(bad: float):
    from verifylab.comm.bands import classify_reading

    with pytest.raises(ValueError, match="finite number of microseconds"):
        classify_reading(bad, 8, "p2p", [])


@pytest.mark.parametrize("world", [0, -1, 10**12])
def test_an_impossible_world_size_is_refused(world: int):
    from verifylab.comm.bands import classify_reading

    with pytest.raises(ValueError, match="world size"):
        classify_reading(25.0, world, "p2p", [])


def test_one_inf_public_row_does_not_open_the_healthy_band():
    from verifylab.comm.bands import bands_from_public, classify_reading

    public = _public()
    public.loc[len(public)] = {**public.iloc[0].to_dict(), "id": "pub-inf", "value": float("inf")}
    bands = bands_from_public(public, 57344)
    assert all(b.high_us < 100 for b in bands)
    assert classify_reading(1030.0, 8, "p2p", bands).regime is Regime.DEGRADED


def test_the_stored_probe_without_p2p_and_without_channel_lines_is_unknown_not_healthy():
    """A log with no channel lines (NCCL_DEBUG_SUBSYS without the transports): unknown, whatever the latency."""
    lat = _latency(2, "unknown", {"all": 17.0})
    [whole] = decide(
        lat, _transport({}), _p2p(2), {"NCCL_P2P_DISABLE": "1"}, public_measurements_or_none(ROOT / "data")
    )
    assert whole.regime is Regime.UNKNOWN and "no channel lines" in whole.reason
