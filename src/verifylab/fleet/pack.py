"""A box's run folders travel to the driver as one gzip'd tar and its sha256; the driver unpacks them into its run
store whole or not at all: members are checked (plain files and folders under a run id, nothing else), extracted
beside the store and renamed in, and each manifest is told where the run was measured."""

from __future__ import annotations

import io
import re
import tarfile
import tempfile
from pathlib import Path

from verifylab.errors import FleetError
from verifylab.iorw import sha256_bytes
from verifylab.store.manifest import RUN_ID_PATTERN
from verifylab.store.runs import RunStore


def pack_runs(runs_dir: Path, run_ids: list[str]) -> tuple[bytes, str]:
    """The run folders ``run_ids`` of ``runs_dir`` as gzip'd tar bytes, and their sha256."""
    buffer = io.BytesIO()

    def data_only(info: tarfile.TarInfo) -> tarfile.TarInfo | None:  # no lock or temporary file travels
        return None if Path(info.name).name.startswith(".") else info

    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for run_id in sorted(run_ids):
            tar.add(runs_dir / run_id, arcname=run_id, filter=data_only)
    blob = buffer.getvalue()
    return blob, sha256_bytes(blob)


def _checked_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    members = tar.getmembers()
    for m in members:
        parts = Path(m.name).parts
        if m.name.startswith("/") or ".." in parts or not parts or not re.fullmatch(RUN_ID_PATTERN, parts[0]):
            raise FleetError(f"a returned run holds {m.name!r}: not a path inside a run folder (nothing unpacked)")
        if not (m.isfile() or m.isdir()):
            raise FleetError(f"a returned run holds {m.name!r}, a link or device (nothing unpacked)")
    return members


def unpack_runs(blob: bytes, digest: str, store: RunStore, fleet: dict[str, str]) -> list[str]:
    """Check ``blob`` against ``digest``, then add its runs to ``store`` with ``fleet`` (host, node, job,
    campaign) in their manifests; a run already there is replaced whole. Returns the run ids."""
    if sha256_bytes(blob) != digest:
        raise FleetError("a returned run does not match its sha256 (damaged on the way): nothing unpacked")
    store.root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fleet-", dir=store.root) as tmp:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            tar.extractall(tmp, members=_checked_members(tar), filter="data")
        run_ids = sorted(p.name for p in Path(tmp).iterdir() if p.is_dir())
        staged = RunStore(tmp)
        for run_id in run_ids:
            manifest = staged.manifest(run_id)  # a folder without a readable manifest is refused here
            manifest.fleet = {**manifest.fleet, **fleet}
            staged.save_manifest(manifest)
        for run_id in run_ids:
            target = store.root / run_id
            if target.exists():
                old = Path(tmp) / f".replaced-{run_id}"
                target.rename(old)
            (Path(tmp) / run_id).rename(target)
    return run_ids


def runs_changed(runs_dir: Path, before: dict[str, float]) -> list[str]:
    """Run folders new since ``before`` (run id -> manifest mtime) or whose manifest changed since."""
    return sorted(run_id for run_id, mtime in manifest_times(runs_dir).items() if before.get(run_id) != mtime)


def manifest_times(runs_dir: Path) -> dict[str, float]:
    """Run id -> the mtime of its manifest, for every run folder of ``runs_dir``."""
    if not runs_dir.is_dir():
        return {}
    return {p.parent.name: p.stat().st_mtime_ns / 1e9 for p in runs_dir.glob("*/manifest.json") if p.parent.is_dir()}
