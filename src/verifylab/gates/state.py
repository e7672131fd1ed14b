"""Where a tree stands with verifylab's patch, read from ``<root>/.verifylab-gates/`` (the journal: backups and a
manifest written before any file is touched) and the files' hashes; ``revert`` and the recovery ``apply`` runs
first get out of any interrupted state (kill -9 in an apply or a revert, a pip reinstall or upgrade)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from verifylab.errors import GateError
from verifylab.gates.lock import tree_lock
from verifylab.iorw import atomic_write_bytes, atomic_write_json, remove_stray_temps, sha256_bytes, sha256_of

STATE_DIR = ".verifylab-gates"
REVERT = "verifylab gates revert"


@dataclass
class TreeState:
    """What state a tree is in with respect to verifylab's patch, and the one command that gets out of it."""

    state: str  # clean, applied, interrupted, reinstalled, changed, unreadable
    detail: str
    way_out: str = ""
    files: dict[str, str] = field(default_factory=dict)  # rel -> before / after / other / missing


def read_manifest(state: Path) -> dict | None:
    path = state / "manifest.json"
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
            raise ValueError("no 'files' table")
        return manifest
    except (ValueError, UnicodeDecodeError) as exc:
        raise GateError(
            f"{path} is unreadable ({exc}): `verifylab gates revert --forget` drops the record "
            "(reinstall the package first if files were patched)"
        ) from None


def tree_state(root: Path) -> TreeState:
    """Clean, applied, or an interrupted / outdated apply (kill -9, pip reinstall or upgrade), from the manifest
    and the files' hashes."""
    state = root / STATE_DIR
    try:
        manifest = read_manifest(state)
    except GateError as exc:
        return TreeState("unreadable", str(exc), "verifylab gates revert --forget")
    if manifest is None:
        return TreeState("clean", "no verifylab patch recorded in this tree")
    files = {}
    for rel, hashes in manifest["files"].items():
        path = root / rel
        digest = sha256_of(path) if path.is_file() else None
        files[rel] = (
            "missing"
            if digest is None
            else "after"
            if digest == hashes.get("after")
            else "before"
            if digest == hashes.get("before")
            else "other"
        )
    kinds = set(files.values())
    if kinds & {"other", "missing"}:
        odd = sorted(rel for rel, kind in files.items() if kind in ("other", "missing"))
        return TreeState(
            "changed",
            f"{', '.join(odd)} changed after apply: neither the original nor verifylab's patch (pip upgrade? edit?)",
            "verifylab gates revert --forget",
            files,
        )
    status = manifest.get("status")
    done = sum(kind == "after" for kind in files.values())
    if status == "applying":
        return TreeState("interrupted", f"an apply stopped after {done} of {len(files)} file(s)", REVERT, files)
    if status == "reverting":
        return TreeState("interrupted", f"a revert stopped with {done} of {len(files)} file(s) patched", REVERT, files)
    if kinds == {"before"}:
        return TreeState("reinstalled", "every file is the original again (pip reinstalled?)", REVERT, files)
    if kinds == {"after"}:
        return TreeState("applied", f"{len(files)} file(s) patched for {manifest.get('target')}", REVERT, files)
    return TreeState("interrupted", f"{done} of {len(files)} file(s) patched", REVERT, files)


def remove_temps(root: Path, rels) -> None:
    """Delete the temporary files killed writes left beside the patched files and in the state folder."""

    for rel in rels:
        remove_stray_temps(root / rel)
    state = root / STATE_DIR
    if state.is_dir():
        for tmp in state.rglob(".*.tmp"):
            tmp.unlink(missing_ok=True)


def remove_state(state: Path) -> None:
    for path in sorted(state.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    if state.exists():
        state.rmdir()


def recover_for_apply(root: Path) -> None:
    """Before an apply: roll back an interrupted or reinstalled-over one; refuse an applied or changed tree."""
    state = root / STATE_DIR
    current = tree_state(root)
    if current.state == "applied":
        return  # apply itself finds nothing left to open, or refuses to patch over the record
    if current.state in ("changed", "unreadable"):
        raise GateError(f"{current.detail}; nothing was changed. Way out: {current.way_out}")
    if current.state in ("interrupted", "reinstalled"):
        revert(root)
    elif state.is_dir():  # a crash before the manifest was written: backups only, no file touched
        remove_state(state)


def revert(root: Path, forget: bool = False) -> list[str]:
    """Restore every patched file byte for byte (checked against the manifest's hashes) and drop the record; also
    recovers an interrupted apply or revert (files already original are left as they are). ``forget``: drop the
    record without touching any file (after pip reinstalled or upgraded the package)."""
    with tree_lock(root, "revert"):
        return _revert(root, forget)


def _revert(root: Path, forget: bool) -> list[str]:
    state = root / STATE_DIR
    if forget:
        if not state.exists():
            raise GateError(f"{root}: no {STATE_DIR}: nothing to forget")
        remove_temps(root, [])
        remove_state(state)
        return []
    manifest = read_manifest(state)
    if manifest is None:
        if state.is_dir():  # an apply killed before its manifest: backups only, no file was touched
            remove_state(state)
            return []
        raise GateError(f"{root}: no {STATE_DIR}/manifest.json: nothing to revert")
    current = tree_state(root)
    if current.state == "changed":
        raise GateError(f"{current.detail}: not reverting anything. Way out: {current.way_out}")
    patched = [rel for rel, kind in current.files.items() if kind == "after"]
    for rel in patched:
        backup = state / "backup" / rel
        if not backup.is_file() or sha256_bytes(backup.read_bytes()) != manifest["files"][rel]["before"]:
            raise GateError(f"{backup}: backup missing or altered: not reverting anything")
    if patched and manifest.get("status") != "reverting":  # the journal first: a crash from here is a revert's
        atomic_write_json(state / "manifest.json", {**manifest, "status": "reverting"})
    for rel in patched:
        atomic_write_bytes(root / rel, (state / "backup" / rel).read_bytes())
    if any(sha256_of(root / rel) != h["before"] for rel, h in manifest["files"].items()):
        raise GateError("revert wrote every file but some hashes differ from the originals")
    remove_temps(root, manifest["files"])
    remove_state(state)
    return sorted(patched)
