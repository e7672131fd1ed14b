"""Run store: ``data/runs/<run_id>/manifest.json`` (``store.manifest``) plus tables (Parquet, or CSV for small
summaries).

A run is *measured* data: it names the host, GPU, versions and project commit it came from. Writes are
atomic; reads validate against the schema and fail naming the file and field.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import stat
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock, Timeout

from verifylab.csv_cells import csv_text, restored
from verifylab.errors import ManifestError, RunExistsError, RunNotFoundError, StorageError
from verifylab.host import capture_host
from verifylab.intake import OutsideFileError, inside, read_outside_bytes
from verifylab.iorw import atomic_write_json, atomic_write_text, atomic_write_with, file_exists, remove_stray_temps
from verifylab.redact import redact_obj
from verifylab.sources import MeasuredRun, MeasuredRuns
from verifylab.store.digests import LOCK_FILE, MEASURING_LOCK_FILE, NOT_DATA_FILES  # noqa: F401 (named here too)
from verifylab.store.manifest import (
    MANIFEST,
    TABLE_NAME_PATTERN,
    Manifest,
    check_resume,
    manifest_from_host,
    read_manifest,
)
from verifylab.store.migrations import migrate_to_3
from verifylab.store.schema import SCHEMA_VERSION, check_frame, check_values, migrate, spec_of
from verifylab.vocab import plain_run_id

_LOCKS: dict[str, FileLock] = {}  # one re-entrant lock object per run folder and process


# The synthetic verify-pass campaign (benchmarks/gpu_multi.py) stores NCCL curves on every path (nvlink, shm,
# socket) beside its passes; a communication probe stores one path per run. Readers of the campaign ask for both.
def _write_frame(target: Path, frame: pd.DataFrame) -> None:
    """``frame`` as the table file ``target`` (parquet or CSV, by its suffix), atomically; what a killed earlier
    write of it left is removed first. The caller holds the run's lock."""
    remove_stray_temps(target)
    if target.suffix == ".parquet":
        atomic_write_with(target, partial(pq.write_table, pa.Table.from_pandas(frame, preserve_index=False)))
    else:
        atomic_write_text(target, csv_text(frame, lineterminator="\n"))  # formula cells neutralised, read back whole


def _identity(path: Path) -> tuple[int, int, int] | None:
    """A regular file's identity (inode, size, mtime in ns), or None for anything else (a link, nothing)."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns) if stat.S_ISREG(info.st_mode) else None


# What this process parsed, by store folder (resolved), kept with each file's identity: shared by every RunStore of
# one folder, so a second reader of the same store (another Evidence, another command in a session) parses nothing.
_PARSED: dict[str, dict[str, tuple[tuple[int, int, int], Manifest]]] = {}
_TABLES: dict[str, dict[tuple[str, str], tuple[tuple[int, int, int], pd.DataFrame]]] = {}


THREADED_PARQUET_BYTES = 8 << 20  # a parquet table past this size is decoded on several threads


class RunStore:
    """The folder of measured runs (default ``data/runs``). Each manifest and table is parsed once per process and
    kept with its file's identity (inode, size, mtime): a file rewritten (always by rename: a new inode) is read
    again, so a store of thousands of runs costs one parse per file, however many readers ask."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        folder = os.path.realpath(self.root)
        self._parsed = _PARSED.setdefault(folder, {})
        self._tables = _TABLES.setdefault(folder, {})

    def path(self, run_id: str) -> Path:
        """The run's folder; a run id is a plain name (no path: nothing outside the store is ever read)."""
        return self.root / plain_run_id(run_id)

    def run_ids(self) -> list[str]:
        """Ids of every folder holding a manifest, sorted; a run folder that is a link is refused (what the
        book reads lies inside the store)."""
        if not self.root.is_dir():
            return []
        ids = []
        with os.scandir(self.root) as entries:
            for entry in entries:
                if entry.is_symlink():  # an entry of the folder itself: no link is all "inside" asks of it
                    self._inside(Path(entry.path))
                if entry.is_dir(follow_symlinks=False) and file_exists(self.root / entry.name / MANIFEST):
                    ids.append(entry.name)
        return sorted(ids)

    def _inside(self, path: Path) -> Path:
        """``path`` when it is no link and lies inside the store; :class:`ManifestError` naming it otherwise."""
        if not inside(path, self.root):
            raise ManifestError(f"{path}: a link (or a path) out of the run store {self.root}: refused")
        return path

    def exists(self, run_id: str) -> bool:
        folder = self.path(run_id)
        return folder.exists() and file_exists(self._inside(folder) / MANIFEST)

    def manifest(self, run_id: str) -> Manifest:
        """Validated manifest of one run (parsed once while its file is unchanged: read it, do not edit it);
        unknown ids list what is stored."""
        path = self.path(run_id) / MANIFEST
        identity = _identity(path)
        if identity is not None and not path.parent.is_symlink():
            kept = self._parsed.get(run_id)
            if kept is not None and kept[0] == identity:
                return kept[1]
            manifest = self._manifest_to_edit(run_id)
            self._parsed[run_id] = (identity, manifest)
            return manifest
        return self._manifest_to_edit(run_id)

    def _manifest_to_edit(self, run_id: str) -> Manifest:
        """The manifest of one run, read from its file now (a fresh object a writer may change and save)."""
        if not self.exists(run_id):
            raise RunNotFoundError.naming(run_id, self.root, self.run_ids())
        return read_manifest(self.path(run_id) / MANIFEST)

    def manifests(self) -> list[Manifest]:
        return [self.manifest(run_id) for run_id in self.run_ids()]

    def create(self, manifest: Manifest, exist_ok: bool = False) -> Manifest:
        """Register a new run (writes its manifest). Refuses to overwrite unless ``exist_ok``."""
        if self.exists(manifest.run_id) and not exist_ok:
            raise RunExistsError(f"run '{manifest.run_id}' already exists in {self.root}")
        self.save_manifest(manifest)
        return manifest

    def open_or_create(
        self,
        run_id: str,
        label: str,
        parameters: dict[str, Any],
        purpose: str,
        status: Literal["complete", "partial"] = "complete",
        with_torch: bool = True,
        mechanics_only: bool = False,
        campaign: str = "",
    ) -> Manifest:
        """The run ``run_id``: resumed when stored, else created for this host (``verifylab env``'s capture).
        A resume must be the same measurement: same label, and no parameter the run already records with another
        value (a chapter adding its own parameters to a run another chapter made is fine; they are recorded)."""
        if self.exists(run_id):
            with self.lock(run_id):
                stored = self._manifest_to_edit(run_id)
                check_resume(stored, label, redact_obj(json.loads(json.dumps(parameters, default=str))))
                added = {k: v for k, v in parameters.items() if k not in stored.parameters}
                if added:
                    stored.parameters = {**stored.parameters, **added}
                    self.save_manifest(stored)
                return stored

        manifest = manifest_from_host(run_id, label, capture_host(with_torch=with_torch), parameters, purpose)
        manifest.status = status
        manifest.mechanics_only = mechanics_only
        manifest.campaign = campaign
        return self.create(manifest)

    @contextlib.contextmanager
    def measuring(self, run_id: str) -> Iterator[None]:
        """Hold the run's measuring lock for as long as something measures into it: a second process that wants
        to measure into the same run is refused at once (it would mix its cells with these). Released when the
        block ends or the process dies; re-entrant in one process."""
        folder = self.path(run_id)
        folder.mkdir(parents=True, exist_ok=True)
        path = str(folder / MEASURING_LOCK_FILE)
        lock = _LOCKS.setdefault(path, FileLock(path, timeout=0))
        try:
            lock.acquire()
        except Timeout:
            raise RunExistsError(
                f"run '{run_id}' is being measured by another process: wait for it, or measure into another run id"
            ) from None
        try:
            yield
        finally:
            lock.release()

    @contextlib.contextmanager
    def lock(self, run_id: str) -> Iterator[None]:
        """Hold the run's lock (``<run>/.verifylab.lock``, another process waits): read-modify-write of the
        manifest by two writers never loses a table. Re-entrant in one process."""
        folder = self.path(run_id)
        path = str(folder / LOCK_FILE)
        lock = _LOCKS.setdefault(path, FileLock(path))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            lock.acquire()
        except OSError as exc:
            raise StorageError(
                f"{folder}: cannot lock the run to write it ({exc.strerror or exc}): is it writable?"
            ) from None
        try:
            yield
        finally:
            lock.release()

    def save_manifest(self, manifest: Manifest) -> None:
        """Validate and write ``manifest``; credentials in its parameters and notes never reach the disk."""
        checked = Manifest.model_validate(manifest.model_dump())  # edits made in place validated and redacted
        with self.lock(manifest.run_id):
            target = self.path(manifest.run_id) / MANIFEST
            remove_stray_temps(target)  # a killed earlier write of the manifest
            atomic_write_json(target, checked.model_dump(mode="json"))

    def write_table(
        self, run_id: str, name: str, frame: pd.DataFrame, fmt: Literal["parquet", "csv"] = "parquet"
    ) -> Path:
        """Store one table atomically and list it in the manifest; the table and its columns must be declared
        (``verifylab.store.schema``)."""
        if not re.fullmatch(TABLE_NAME_PATTERN, name):
            raise ManifestError(f"table name {name!r} must match {TABLE_NAME_PATTERN}")
        check_frame(name, frame)
        file_name = f"{name}.{fmt}"
        target = self.path(run_id) / file_name
        with self.lock(run_id):  # the manifest is read inside the lock: a concurrent writer's table stays listed
            manifest = self._manifest_to_edit(run_id)
            _write_frame(target, frame)
            manifest.tables[name] = file_name
            self.save_manifest(manifest)
        return target

    def read_table(self, run_id: str, name: str) -> pd.DataFrame:
        """Load one table of a run, under the current schema's column names (a copy: the caller may change it);
        a missing or unreadable table names the file."""
        manifest = self.manifest(run_id)  # parsed once for the file's name and the schema it was written under
        identity = _identity(self.path(run_id) / manifest.tables[name]) if name in manifest.tables else None
        kept = self._tables.get((run_id, name))
        if identity is not None and kept is not None and kept[0] == identity:
            return kept[1].copy()
        frame = migrate(name, self._read_file(manifest, name), manifest.schema_version)
        try:
            check_frame(name, frame)  # under today's names: every column declared, numbers where declared,
            check_values(name, frame)  # and every time, rate or size finite and not negative
        except ManifestError as exc:
            raise ManifestError(f"run '{run_id}': {exc}") from None
        if identity is not None:
            self._tables[(run_id, name)] = (identity, frame.copy())
        return frame

    def _read_file(self, manifest: Manifest, name: str) -> pd.DataFrame:
        """One table of the run ``manifest`` describes, as its file holds it."""
        run_id = manifest.run_id
        if name not in manifest.tables:
            have = ", ".join(sorted(manifest.tables)) or "none"
            raise ManifestError(f"run '{run_id}' has no table '{name}' (tables: {have})")
        path = self.path(run_id) / manifest.tables[name]
        if not file_exists(path) and not path.exists() and not path.is_symlink():
            raise ManifestError(f"{path}: listed in the manifest but missing")
        data = self.read_file(run_id, manifest.tables[name], "table")
        try:
            if path.suffix == ".parquet":  # a run's tables are small: threads cost more CPU than they save
                threads = len(data) > THREADED_PARQUET_BYTES
                # one file, read as one: pq.read_table goes through pyarrow's datasets for the same table (about
                # 1 ms more a file: the oldest grid's 56 sweep tables 0.17-0.23 CPU-s against 0.11-0.17)
                table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=threads)
                return table.to_pandas(use_threads=threads)
            return restored(pd.read_csv(io.BytesIO(data)))
        except (pa.ArrowInvalid, ValueError, OSError) as exc:  # binary, empty or cut tables too
            raise ManifestError(f"{path}: unreadable table ({exc})") from exc

    def read_file(self, run_id: str, file_name: str, kind: str) -> bytes:
        """One file of a run (``kind`` as :data:`verifylab.intake.LIMITS` names it): a regular file inside the run's
        folder, reached through no link, within its kind's size; :class:`ManifestError` naming it otherwise."""
        try:
            return read_outside_bytes(self.path(run_id) / file_name, kind, root=self.path(run_id))
        except OutsideFileError as exc:
            raise ManifestError(f"run '{run_id}': {exc}") from None

    def upsert_rows(self, run_id: str, name: str, rows: pd.DataFrame) -> None:
        """Add ``rows`` to table ``name`` (CSV), replacing stored rows with the same declared key (a cell measured
        again); read and written under the run's lock, so concurrent writers never lose a row."""
        key = [k for k in spec_of(name).key if k in rows.columns]
        with self.lock(run_id):
            existing = self.table_or_none(run_id, name)
            if existing is not None and not existing.empty and key:
                stored = existing.set_index(key).index
                existing = existing[~stored.isin(rows.set_index(key).index)]
            frames = [f for f in (existing, rows) if f is not None and not f.empty]
            table = pd.concat(frames, ignore_index=True) if frames else rows
            self.write_table(run_id, name, table, fmt="csv")

    def migrate(self, run_id: str) -> bool:
        """Rewrite a run of an older schema under the current one (each table read through the migration and
        written back atomically, then the manifest); False when it is current already."""
        with self.lock(run_id):
            manifest = self._manifest_to_edit(run_id)
            if manifest.schema_version >= SCHEMA_VERSION:
                return False
            for name, file_name in manifest.tables.items():
                stored = self._read_file(manifest, name)  # the manifest read once for every table
                frame = migrate(name, stored, manifest.schema_version)
                if list(frame.columns) == list(stored.columns):
                    continue  # nothing of this table changed: its file stays byte for byte
                _write_frame(self.path(run_id) / file_name, frame)
            if manifest.schema_version < 3:
                manifest.notes.extend(migrate_to_3(self.path(run_id), manifest))
            manifest.schema_version = SCHEMA_VERSION
            self.save_manifest(manifest)
            return True

    def table_or_none(self, run_id: str, name: str) -> pd.DataFrame | None:
        """Like :meth:`read_table`, but None when the run has no such table."""
        if name not in self.manifest(run_id).tables:
            return None
        return self.read_table(run_id, name)

    def runs_with_table(self, name: str) -> list[str]:
        """Ids of runs that store a table called ``name``."""
        return [m.run_id for m in self.manifests() if name in m.tables]

    def mark_test_double(self, run_id: str) -> None:
        """The run was measured against verifylab's test double: mechanics only, never evidence, and it says so."""
        with self.lock(run_id):
            manifest = self._manifest_to_edit(run_id)
            if manifest.test_double:
                return
            manifest.test_double = manifest.mechanics_only = True
            manifest.notes.append("measured against verifylab's test double (it said so on every answer): not data")
            self.save_manifest(manifest)

    def set_status(self, run_id: str, status: Literal["complete", "partial", "failed"]) -> None:
        """Close (or reopen) a run: ``complete`` when it holds what was asked, ``failed`` when nothing was."""
        with self.lock(run_id):
            manifest = self._manifest_to_edit(run_id)
            manifest.status = status
            self.save_manifest(manifest)

    def of_campaign(self, *campaigns: str) -> list[str]:
        """Ids of the runs whose manifest names one of ``campaigns``, sorted."""
        return [m.run_id for m in self.manifests() if m.campaign in campaigns]

    def newest_with(self, *names: str) -> str | None:
        """The most recently created run (by the manifest's ``created``) that holds every table in ``names``."""
        holding = [m for m in self.manifests() if all(n in m.tables for n in names)]
        return max(holding, key=lambda m: m.created).run_id if holding else None

    def measured(self) -> MeasuredRuns:
        """Every stored run as the cost model reads runs (tables read on first use)."""
        return MeasuredRuns(
            (
                MeasuredRun(
                    m.run_id,
                    frozenset(m.tables),
                    partial(self.read_table, m.run_id),
                    m.created,
                    m.label,
                    m.mechanics_only,
                    m.gpu_name or "",
                    m.parameters,
                    m.campaign,
                )
                for m in self.manifests()
            ),
            str(self.root),
        )

    def summary(self) -> pd.DataFrame:
        """One row per stored run: id, label, GPU, interconnect, created, tables. A run whose manifest cannot be
        read is listed with the reason as its status (one bad manifest never hides the others)."""
        rows: list[dict[str, Any]] = []
        for run_id in self.run_ids():
            try:
                m = self.manifest(run_id)
            except ManifestError as exc:
                rows.append({"run_id": run_id, "label": "", "status": f"unreadable: {exc}"})
                continue
            rows.append(
                {
                    "run_id": m.run_id,
                    "label": m.label,
                    "status": m.status,
                    "gpu": f"{m.gpu_count}x {m.gpu_name}" if m.gpu_name else "no GPU",
                    "sm": m.compute_capability,
                    "interconnect": m.interconnect,
                    "created": m.created.strftime("%Y-%m-%d %H:%M"),
                    "tables": ", ".join(sorted(m.tables)),
                }
            )
        columns = ["run_id", "label", "status", "gpu", "sm", "interconnect", "created", "tables"]
        return pd.DataFrame(rows, columns=columns).astype(object).fillna("")
