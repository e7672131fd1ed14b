"""The committed registry of editions (``book/editions.json``): each edition's id, date, commit, data digest, runs
and typed findings, appended under a lock and never rewritten. Light: registering reads no evidence and renders
nothing."""

from __future__ import annotations

import json
from pathlib import Path

from filelock import FileLock

from verifylab.errors import ReferenceDataError
from verifylab.iorw import atomic_write_json
from verifylab.publish.finding import Finding, from_legacy

REGISTRY = Path("book") / "editions.json"


def load_registry(root: Path) -> list[dict]:
    """The committed registry, each edition's findings as typed records (an unreadable one is named)."""
    path = root / REGISTRY
    if not path.is_file():
        return []
    try:
        registry = json.loads(path.read_text(encoding="utf-8"))
        for entry in registry:
            found = entry.get("key_findings", [])
            entry["key_findings"] = (
                from_legacy(found) if isinstance(found, dict) else [Finding.model_validate(f) for f in found]
            )
    except (ValueError, TypeError, KeyError) as exc:
        raise ReferenceDataError(f"{path}: not a registry of editions with typed findings ({exc})") from None
    return registry


def publish(root: Path, edition: dict) -> None:
    """Register the edition in the committed ``book/editions.json`` (id, date, commit, digest, runs, findings).
    Earlier entries are kept as they were written, byte for byte in content: a registry is never rewritten.
    Read and written under a lock (``book/.editions.lock``): two publishers at once both keep their entry."""
    path = root / REGISTRY
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.parent / ".editions.lock")):
        load_registry(root)  # refuse to append to a registry that does not read
        earlier = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
        _register(path, earlier, edition)


def _register(path: Path, earlier: list[dict], edition: dict) -> None:
    entry = {
        "id": edition["id"],
        "date": edition["built"],
        "commit": edition["commit"],
        "data_digest": edition["data_digest"],
        "runs": edition["runs"],
        "key_findings": edition["key_findings"],
        **({"toolchain": edition["toolchain"]} if edition.get("toolchain") else {}),
    }
    atomic_write_json(path, [e for e in earlier if e["id"] != edition["id"]] + [edition_as_json(entry)])


def edition_as_json(edition: dict) -> dict:
    """An edition with its findings as plain dicts (fields a finding does not have are left out)."""
    return edition | {"key_findings": [f.model_dump(mode="json", exclude_none=True) for f in edition["key_findings"]]}
