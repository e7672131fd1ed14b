"""What an executed chapter was made from, as one digest: its notebook, its parameters, the package's code, what
it read of the data folder (:mod:`chapter_reads`) and the rendering toolchain. ``verifylab book`` records it, with
the reads, in each executed notebook and re-executes a chapter only when it changed: a second build with nothing
changed executes none, and a changed run re-executes only the chapters that read it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifylab.iorw import sha256_bytes, sha256_of
from verifylab.publish.chapter_reads import DataSnapshot, Reads, data_snapshot, reads_digest

METADATA_KEY = "verifylab"  # the executed notebook's metadata entry: {"inputs": digest}


def _json_sha(value: object) -> str:
    """The sha256 of a value as sorted JSON (what is not JSON, as its text)."""
    return sha256_bytes(json.dumps(value, sort_keys=True, default=str).encode())


def inputs_digest(source: Path, parameters: dict[str, Any], code: str, data: str, toolchain: dict[str, str]) -> str:
    """The digest of one chapter's inputs: its notebook's text, its parameters, the code, data and toolchain."""
    record = {
        "notebook": sha256_of(source),
        "parameters": parameters,
        "code": code,
        "data": data,
        "toolchain": toolchain,
    }
    return _json_sha(record)


def _recorded(executed: Path) -> dict:
    """The record an executed chapter carries in its metadata ({} for none to trust: no file, a failed or
    unreadable one, one made before records were kept)."""
    try:
        notebook = json.loads(executed.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entry = notebook.get("metadata", {}).get(METADATA_KEY, {}) if isinstance(notebook, dict) else {}
    return entry if isinstance(entry, dict) else {}


def recorded_inputs(executed: Path) -> str | None:
    """The inputs digest an executed chapter was made from; None when there is none to trust."""
    digest = _recorded(executed).get("inputs")
    return digest if isinstance(digest, str) else None


def recorded_reads(executed: Path) -> Reads | None:
    """What the executed chapter read of the data folder, as recorded (None: nothing recorded to trust)."""
    return Reads.of_json(_recorded(executed).get("reads"))


@dataclass(frozen=True)
class ChapterInputs:
    """Everything a chapter's digest is made of but its reads: known before it runs."""

    source: Path
    parameters: dict[str, Any]
    code: str
    toolchain: dict[str, str]
    data_dir: Path
    data_names: list[str]  # the data folder's files, relative (the names a chapter may ask about)

    def digest(self, reads: Reads, snapshot: DataSnapshot | None = None) -> str:
        """The inputs digest once the chapter read ``reads`` (from ``snapshot``: the data as it began; else now)."""
        data = reads_digest(self.data_dir, reads, self.data_names, snapshot)
        return inputs_digest(self.source, self.parameters, self.code, data, self.toolchain)

    def begin(self) -> BegunChapter:
        """The boundary of a chapter's reads: the data folder fixed right before the chapter executes, so what it
        read is digested as it could have read it, and a run landing while it executes is seen by the next build."""
        return BegunChapter(self, data_snapshot(self.data_dir))

    def unchanged(self, executed: Path) -> bool:
        """Whether ``executed`` was made from these inputs and what it read is as it was."""
        entry = _recorded(executed)  # the notebook read once
        recorded, reads = entry.get("inputs"), Reads.of_json(entry.get("reads"))
        return isinstance(recorded, str) and reads is not None and recorded == self.digest(reads)

    def parts(self, reads: Reads, snapshot: DataSnapshot | None = None) -> dict[str, str]:
        """The digest's parts by name, as a rebuild names the ones that changed."""
        return {
            "its notebook": sha256_of(self.source),
            "its parameters": _json_sha(self.parameters),
            "verifylab's code": self.code,
            "the data it read": reads_digest(self.data_dir, reads, self.data_names, snapshot),
            "the toolchain": _json_sha(self.toolchain),
        }

    def changed(self, executed: Path) -> list[str]:
        """Why it runs again, in words: which of its inputs changed since ``executed`` was made (``verifylab's code
        changed``), or that nothing was recorded to compare with."""
        if not executed.is_file():
            return ["never executed here"]
        entry = _recorded(executed)
        before, reads = entry.get("parts"), Reads.of_json(entry.get("reads"))
        if not isinstance(before, dict) or reads is None:
            return ["no record of its inputs"]
        now = self.parts(reads)
        return [f"{name} changed" for name in now if before.get(name) != now[name]] or ["its record changed"]


@dataclass(frozen=True)
class BegunChapter:
    """A chapter's inputs with the data folder as it was when the chapter began (:meth:`ChapterInputs.begin`)."""

    inputs: ChapterInputs
    began: DataSnapshot

    def record(self, reads: Reads) -> tuple[str, dict[str, str]]:
        """The digest and its parts to record for a chapter that read ``reads``: of the data as it began."""
        return self.inputs.digest(reads, self.began), self.inputs.parts(reads, self.began)
