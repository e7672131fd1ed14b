"""A box's run folders travel to the driver as one gzip'd tar and its sha256; the driver unpacks them into its run
store whole or not at all: members are checked (plain files and folders under a run id, nothing else), extracted
beside the store and renamed in, and each manifest is told where the run was measured."""

from __future__ import annotations

import io
import re
import tarfile
import tempfile
import zlib
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


MAX_UNPACKED_BYTES = 8 << 30  # what one box's runs may unpack to (its traces included)
MAX_MEMBERS = 50_000  # files and folders in one box's runs


def _checked_members(tar: tarfile.TarFile, max_bytes: int) -> list[tarfile.TarInfo]:
    members, total = [], 0
    for m in tar:  # read member by member: a tar bomb is stopped at the cap, not after it is listed whole
        members.append(m)
        total += max(m.size, 0)
        if len(members) > MAX_MEMBERS or total > max_bytes:
            raise FleetError(
                f"a returned tar unpacks to more than {max_bytes} bytes or {MAX_MEMBERS} files (nothing unpacked)"
            )
        parts = Path(m.name).parts
        if m.name.startswith("/") or ".." in parts or not parts or not re.fullmatch(RUN_ID_PATTERN, parts[0]):
            raise FleetError(f"a returned run holds {m.name!r}: not a path inside a run folder (nothing unpacked)")
        if not (m.isfile() or m.isdir()):
            raise FleetError(f"a returned run holds {m.name!r}, a link or device (nothing unpacked)")
    return members


def unpack_runs(
    blob: bytes, digest: str | None, store: RunStore, fleet: dict[str, str], max_bytes: int = MAX_UNPACKED_BYTES
) -> list[str]:
    """Check ``blob`` against ``digest`` (required), then add its runs to ``store`` with ``fleet`` (host, node, job,
    campaign) in their manifests. A run is never overwritten: one whose id the store holds already comes in
    renamed (``<id>-<host>``, then ``-2``, ...) with its original id in ``fleet.renamed_from``. Returns the ids
    the runs have in the store. Nothing is unpacked when anything is wrong."""
    if not digest:
        raise FleetError("a returned tar came without its sha256: nothing unpacked")
    if sha256_bytes(blob) != digest:
        raise FleetError("a returned run does not match its sha256 (damaged on the way): nothing unpacked")
    store.root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fleet-", dir=store.root) as tmp:
        try:
            with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
                tar.extractall(tmp, members=_checked_members(tar, max_bytes), filter="data")
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            reason = " ".join(str(exc).split())[:120] or type(exc).__name__
            raise FleetError(f"a returned tar is not a whole gzip'd tar ({reason}): nothing unpacked") from None
        incoming = sorted(p.name for p in Path(tmp).iterdir() if p.is_dir() and not p.name.startswith("."))
        staged = RunStore(tmp)
        landed: list[str] = []
        arrived: list[str] = []
        for run_id in incoming:
            manifest = staged.manifest(run_id)  # a folder without a readable manifest is refused here
            again = _stored_copy(store, staged, run_id, fleet)
            if again is not None:  # a re-run of the same job returned the same run: keep the one stored
                arrived.append(again)
                continue
            new_id = _free_id(store, run_id, fleet.get("host", "box"), set(landed))
            manifest.fleet = {**manifest.fleet, **fleet, **({"renamed_from": run_id} if new_id != run_id else {})}
            if new_id != run_id:
                (Path(tmp) / run_id).rename(Path(tmp) / new_id)
                manifest.run_id = new_id
            staged.save_manifest(manifest)
            landed.append(new_id)
        for run_id in landed:
            (Path(tmp) / run_id).rename(store.root / run_id)  # a free name: nothing is replaced
    return arrived + landed


def _stored_copy(store: RunStore, staged: RunStore, run_id: str, fleet: dict[str, str]) -> str | None:
    """The id of a stored run that ``run_id`` (staged) repeats: returned by the same host (and job, where named),
    its manifest the same but for the fleet record, every other file byte for byte the same; None otherwise."""
    incoming = staged.root / run_id
    names = [run_id, *sorted(p.name for p in store.root.glob(f"{run_id}-*") if p.is_dir())]
    for name in names:
        if not (store.root / name / "manifest.json").is_file():
            continue
        stored = store.manifest(name)
        if name != run_id and stored.fleet.get("renamed_from") != run_id:
            continue
        if any(stored.fleet.get(key) != fleet.get(key) for key in ("host", "job") if key in fleet):
            continue
        theirs = staged.manifest(run_id).model_dump(exclude={"fleet", "run_id"}, mode="json")
        if stored.model_dump(exclude={"fleet", "run_id"}, mode="json") == theirs and _same_files(
            store.root / name, incoming
        ):
            return name
    return None


def _same_files(a: Path, b: Path) -> bool:
    """Whether two run folders hold the same files, byte for byte, their manifests and the store's own hidden
    files (its lock) aside."""

    def files(root: Path) -> dict[str, Path]:
        return {
            p.relative_to(root).as_posix(): p
            for p in root.rglob("*")
            if p.is_file() and p.name != "manifest.json" and not p.name.startswith(".")
        }

    left, right = files(a), files(b)
    return left.keys() == right.keys() and all(left[k].read_bytes() == right[k].read_bytes() for k in left)


def _free_id(store: RunStore, run_id: str, host: str, taken: set[str]) -> str:
    """``run_id`` when the store has no run of that name, else ``<run_id>-<host>`` (then ``-2``, ``-3``, ...)."""
    if not (store.root / run_id).exists() and run_id not in taken:
        return run_id
    stem = f"{run_id}-{re.sub(r'[^a-z0-9._-]+', '-', host.lower()).strip('-.') or 'box'}"[:90]
    candidate, n = stem, 1
    while (store.root / candidate).exists() or candidate in taken:
        n += 1
        candidate = f"{stem}-{n}"
    return candidate


def runs_changed(runs_dir: Path, before: dict[str, float]) -> list[str]:
    """Run folders new since ``before`` (run id -> manifest mtime) or whose manifest changed since."""
    return sorted(run_id for run_id, mtime in manifest_times(runs_dir).items() if before.get(run_id) != mtime)


def manifest_times(runs_dir: Path) -> dict[str, float]:
    """Run id -> the mtime of its manifest, for every run folder of ``runs_dir``."""
    if not runs_dir.is_dir():
        return {}
    return {p.parent.name: p.stat().st_mtime_ns / 1e9 for p in runs_dir.glob("*/manifest.json") if p.parent.is_dir()}
