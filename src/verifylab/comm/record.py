"""A probe as one measured run: ``allreduce_latency`` (the format chapter 04 and ``model pass --latency RUN``
read), ``p2p_matrix``, ``nccl_transport``, ``p2p_host_settings`` and ``verdict``, plus the raw record the tables
were made from (``probe_raw.json``), so that a later verdict can be re-derived from the same measurements.

The run is assembled in a staging folder beside the store and renamed into place when complete: a failure
leaves no half-written run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from verifylab.comm.nccl_log import compact_nccl_log
from verifylab.comm.policy import policy_from_probe, write_policy
from verifylab.comm.probe import RawProbe
from verifylab.comm.tables import (
    host_settings_table,
    latency_table,
    nccl_graph_table,
    nccl_log,
    p2p_matrix_table,
    probe_path,
    rank_map_table,
    transport_table,
)
from verifylab.comm.verdict import decide, verdict_table
from verifylab.errors import ManifestError, RunExistsError
from verifylab.host import capture_host
from verifylab.iorw import atomic_write_json
from verifylab.store.manifest import Manifest, manifest_from_host
from verifylab.store.migrations import RAW_PROBE_FILE
from verifylab.store.runs import RunStore

RAW_FILE = RAW_PROBE_FILE
PURPOSE = "communication probe: which regime this box's all-reduce is in (P2P, host memory, socket, degraded)"


@dataclass
class ProbeTables:
    latency: pd.DataFrame
    p2p: pd.DataFrame
    transport: pd.DataFrame
    host: pd.DataFrame
    verdict: pd.DataFrame
    rank_map: pd.DataFrame
    nccl_graph: pd.DataFrame

    def named(self) -> dict[str, pd.DataFrame]:
        return {
            "allreduce_latency": self.latency,
            "p2p_matrix": self.p2p,
            "nccl_transport": self.transport,
            "p2p_host_settings": self.host,
            "verdict": self.verdict,
            "rank_map": self.rank_map,
            "nccl_graph": self.nccl_graph,
        }


def probe_tables(raw: RawProbe, public: pd.DataFrame | None = None) -> ProbeTables:
    """Every table of a probe, the verdict placed against ``public`` reference measurements when given."""
    latency, p2p, transport = latency_table(raw), p2p_matrix_table(raw), transport_table(raw)
    verdicts = decide(latency, transport, p2p, raw.environment, public, raw.config.hidden)
    return ProbeTables(
        latency,
        p2p,
        transport,
        host_settings_table(raw),
        verdict_table(verdicts),
        rank_map_table(raw),
        nccl_graph_table(raw),
    )


def default_label(raw: RawProbe, gpu_name: str | None, interconnect: str | None) -> str:
    """``2 x NVIDIA H200 (NVLink), NCCL path p2p``: what every figure of the run is labelled with."""
    if raw.config.backend == "gloo":
        return f"{raw.world} CPU processes (gloo) — probe mechanics, no GPU"
    if raw.world == 1:
        return f"1 x {gpu_name or 'GPU'}, one GPU (no all-reduce path to judge)"
    return f"{raw.world} x {gpu_name or 'GPU'} ({interconnect or 'link unknown'}), NCCL path {probe_path(raw)}"


def store_probe(
    raw: RawProbe, runs_root: Path, run_id: str, label: str | None = None, public: pd.DataFrame | None = None
) -> Manifest:
    """Write the probe as run ``run_id`` under ``runs_root``, all at once (staging folder, then a rename)."""

    store = RunStore(runs_root)
    if store.exists(run_id):
        raise RunExistsError(f"run '{run_id}' already exists in {runs_root}: pick another --run-id")
    host = capture_host(with_torch=False)
    host.topology = raw.host.topology or host.topology
    tables = probe_tables(raw, public)
    parameters = {
        "command": "verifylab comm probe",
        "world_size": raw.world,
        "gpus": raw.devices,
        "config": raw.config.model_dump(mode="json"),
        "nccl_environment": raw.environment,
        "seconds": raw.seconds,
    }
    manifest = manifest_from_host(
        run_id, label or default_label(raw, host.gpu_name, host.interconnect), host, parameters, PURPOSE
    )
    manifest.gpu_count = raw.world if raw.config.backend == "nccl" else 0
    manifest.mechanics_only = raw.config.backend == "gloo"
    manifest.versions.nccl = nccl_log(raw).version or manifest.versions.nccl
    unavailable = {k: v for r in raw.ranks for k, v in r.get("unavailable", {}).items()}
    manifest.notes += [f"{impl} not measured: {why}" for impl, why in sorted(unavailable.items())]
    staging_root = Path(runs_root) / f".staging-{run_id}"
    shutil.rmtree(staging_root, ignore_errors=True)
    try:
        staging = RunStore(staging_root)
        staging.create(manifest)
        for name, frame in tables.named().items():
            staging.write_table(run_id, name, frame, fmt="csv")
        atomic_write_json(staging.path(run_id) / RAW_FILE, raw.to_json())
        write_policy(staging.path(run_id), policy_from_probe(run_id, tables.verdict, tables.latency, raw.environment))
        Path(runs_root).mkdir(parents=True, exist_ok=True)
        os.replace(staging.path(run_id), store.path(run_id))
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging_root)
    return store.manifest(run_id)


def read_raw(store: RunStore, run_id: str) -> RawProbe:
    """The raw record a probe run was made from."""
    path = store.path(run_id) / RAW_FILE
    if not path.exists() and not path.is_symlink():
        raise ManifestError(f"run '{run_id}' has no {RAW_FILE}: it is not a communication probe")
    data = store.read_file(run_id, RAW_FILE, "record")  # inside the run, no link out, size-capped
    try:
        return RawProbe.from_json(json.loads(data))
    except (ValueError, TypeError, KeyError) as exc:
        raise ManifestError(f"{path}: not a probe's raw record ({exc})") from None


def rederive_probe(store: RunStore, run_id: str, public: pd.DataFrame | None = None) -> ProbeTables:
    """Make a stored probe's tables again from its raw record (the manifest, the measurement, stays as it was):
    after a fix to the tables or new public reference bands."""
    raw = read_raw(store, run_id)  # the raw record itself is never rewritten: it is the measurement
    raw.nccl_logs = [compact_nccl_log(text) for text in raw.nccl_logs]
    tables = probe_tables(raw, public)
    with store.lock(run_id):
        for name, frame in tables.named().items():
            store.write_table(run_id, name, frame, fmt="csv")
        write_policy(store.path(run_id), policy_from_probe(run_id, tables.verdict, tables.latency, raw.environment))
    return tables
