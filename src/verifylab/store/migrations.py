"""What a run of schema 2 is rewritten with on its way to schema 3, beyond its tables: its raw probe record without
terminal colour codes, the NCCL version its own NCCL log states where the manifest has none, and the verifylab
version it was made with, read from the commit it recorded. Each change is written into the run's notes; no
measured number changes."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verifylab.errors import ManifestError
from verifylab.intake import OutsideFileError, read_outside_text
from verifylab.iorw import atomic_write_json, file_exists
from verifylab.redact import strip_terminal_codes
from verifylab.store.manifest import Manifest

RAW_PROBE_FILE = "probe_raw.json"  # a communication probe's raw record (verifylab.comm.record writes it)
NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+[^\s]*)")
COMMIT = re.compile(r"\b([0-9a-f]{7,40})\b")
SOURCE_TREE = Path(__file__).resolve().parents[3]  # the checkout this verifylab runs from (its .git, if any)

VersionAt = Callable[[str], str | None]  # a commit -> the version pyproject.toml declared there (None: unknown)


def declared_version_at(commit: str, repo: Path = SOURCE_TREE) -> str | None:
    """The ``project.version`` of pyproject.toml at ``commit`` in ``repo``'s history (None: no git, or not there)."""
    try:
        shown = subprocess.run(
            ["git", "-C", str(repo), "show", f"{commit}:pyproject.toml"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if shown.returncode != 0:
        return None
    try:
        return str(tomllib.loads(shown.stdout)["project"]["version"])
    except (tomllib.TOMLDecodeError, KeyError):
        return None


def version_of_commit(git_commit: str | None, version_at: VersionAt) -> str:
    """``<declared>+g<commit>[.dirty]`` from a recorded commit (``unknown`` where it names none or git cannot
    read it)."""
    found = COMMIT.search(git_commit or "")
    if found is None:
        return "unknown"
    sha = found.group(1)
    declared = version_at(sha) or "unknown"
    dirty = ".dirty" if f"{sha}-dirty" in (git_commit or "") else ""
    return f"{declared}+g{sha[:7]}{dirty}"


def nccl_version_in_logs(logs: list[Any]) -> str | None:
    """The version NCCL printed at start-up in a probe's logs (``NCCL version 2.28.9+cuda13.0``)."""
    for text in logs:
        found = NCCL_VERSION.search(str(text))
        if found:
            return found.group(1)
    return None


def _plain(obj: Any) -> Any:
    """``obj`` (JSON) with every string's terminal colour codes removed."""
    if isinstance(obj, str):
        return strip_terminal_codes(obj)
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


MAX_PROBE_RECORD_BYTES = 64 << 20  # a probe's raw record is a few hundred KiB


def _read_probe_record(path: Path) -> tuple[Any, bool]:
    """A probe's raw record without terminal codes, and whether any were removed; a record that is cut, not JSON,
    not UTF-8, too large or nested past what it can hold is one :class:`ManifestError` naming it (the run is left
    as it was)."""
    try:
        raw = json.loads(read_outside_text(path, "probe record", root=path.parent, limit=MAX_PROBE_RECORD_BYTES))
        plain = _plain(raw)
        return plain, plain != raw
    except OutsideFileError as exc:
        raise ManifestError(f"{exc}: the run was not migrated") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}; cut short?): the run was not "
            "migrated"
        ) from None
    except RecursionError:
        raise ManifestError(f"{path}: nested deeper than a probe record is: the run was not migrated") from None


def migrate_to_3(run_dir: Path, manifest: Manifest, version_at: VersionAt = declared_version_at) -> list[str]:
    """Rewrite what schema 3 adds in ``run_dir`` and ``manifest`` (the caller saves the manifest); returns the
    notes that say what changed."""
    notes = []
    raw_file = run_dir / RAW_PROBE_FILE
    if file_exists(raw_file) and not raw_file.is_symlink():
        plain, changed = _read_probe_record(raw_file)
        if changed:
            atomic_write_json(raw_file, plain)
            notes.append(f"schema 3: terminal colour codes removed from {RAW_PROBE_FILE} (no number changed)")
        if manifest.versions.nccl is None and isinstance(plain, dict):
            nccl = nccl_version_in_logs(plain.get("nccl_logs") or [])
            if nccl:
                manifest.versions.nccl = nccl
                notes.append(f"schema 3: versions.nccl {nccl} read from the run's own NCCL log")
    if manifest.versions.verifylab is None:
        manifest.versions.verifylab = version_of_commit(manifest.git_commit, version_at)
        notes.append(f"schema 3: versions.verifylab {manifest.versions.verifylab} from the recorded git_commit")
    return notes
