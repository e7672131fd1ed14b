"""Editions of the book: a reproducible id, key findings, a committed registry, exports, changes pages.

Edition id = ``<package version>+<data digest>.<git commit>``: the same code and data give the same id.
``_build/html`` always holds the latest edition; ``_build/editions/<id>/`` keeps each one with its exports,
and ``book/editions.json`` (committed, updated by ``verifylab book --publish``: ``registry.py``) lets editions
outlive the build folder: any registered edition can be rebuilt from its commit.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from verifylab import __version__
from verifylab.iorw import atomic_write_json, atomic_write_text
from verifylab.publish.decision import PAGE, decision_markdown
from verifylab.publish.exports import write_exports
from verifylab.publish.finding import Finding, by_key
from verifylab.publish.findings import key_findings
from verifylab.publish.paths import EXPORTS, GENERATED
from verifylab.publish.registry import edition_as_json, load_registry
from verifylab.publish.run_pages import RUNS_FOLDER, write_run_pages
from verifylab.publish.toolchain import toolchain_versions
from verifylab.report.section import md_text, raw_html_block
from verifylab.report.tables import Table
from verifylab.store.digests import data_digest
from verifylab.store.evidence import Evidence


def git_head(root: Path) -> str:
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False, timeout=30
        )
    except subprocess.TimeoutExpired:
        return "nogit"  # git did not answer in 30 s (a hung filesystem): the edition says it has no commit
    return proc.stdout.strip() if proc.returncode == 0 else "nogit"


def edition_id(digest: str, commit: str) -> str:
    """``<version>+<data digest>.<commit>``: the same code and data give the same id."""
    return f"{__version__}+{digest[:8]}.{commit[:7]}"


def runs_used(ev: Evidence) -> list[str]:
    return ev.runs.run_ids()


def changes_since(previous: dict | None, current: list[Finding]) -> pd.DataFrame:
    """Findings that differ from the previous registered edition (all of them when there is none), by key."""
    before, now = by_key((previous or {}).get("key_findings", [])), by_key(current)
    rows = [
        {"finding": f.label, "previous": before[k].shown if k in before else "—", "now": f.shown}
        for k, f in now.items()
        if k not in before or before[k].value != f.value or before[k].confidence != f.confidence
    ]
    rows += [{"finding": f.label, "previous": f.shown, "now": "—"} for k, f in before.items() if k not in now]
    return pd.DataFrame(rows, columns=["finding", "previous", "now"])


def _changes_table(frame: pd.DataFrame) -> str:
    """The changes as the book's own table (identifiers wrap whole, long texts fold), in a raw block."""
    if frame.empty:
        return "_No change._\n"
    return raw_html_block(Table(frame)._repr_html_())


def write_generated_pages(root: Path, ev: Evidence) -> dict:
    """edition.json (for the banner), the decision page and the changes page, before the book is rendered."""
    digest, commit = data_digest(ev.data_dir), git_head(root)  # each read once: the id and the record use both
    eid = edition_id(digest, commit)
    findings = key_findings(ev)
    registry = load_registry(root)
    previous = next((e for e in reversed(registry) if e["id"] != eid), None)
    edition = {
        "id": eid,
        "built": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "data_digest": digest,
        "runs": runs_used(ev),
        "key_findings": findings,
        "previous": previous["id"] if previous else None,
        "toolchain": toolchain_versions(),
    }
    out = root / GENERATED
    atomic_write_json(out / "edition.json", edition_as_json(edition))
    atomic_write_text(
        out / "changes.md",
        "# Changes since the previous edition\n\n"
        + (
            f"Compared with edition `{previous['id']}` ({md_text(previous['date'])}), from the committed registry "
            "`book/editions.json`.\n\n"
            if previous
            else "No earlier edition is registered in `book/editions.json`: every finding is new.\n\n"
        )
        + _changes_table(changes_since(previous, findings)),
    )
    atomic_write_text(out / PAGE, decision_markdown(edition, ev))
    write_run_pages(out / RUNS_FOLDER, ev.runs)
    return edition


def replace_folder(target: Path, fill: Callable[[Path], object]) -> None:
    """``target`` replaced by a folder ``fill`` writes at a staging path beside it, then renamed into place; the old
    folder is removed only once the new one stands. What an earlier interrupted call left is cleaned up first (an
    old folder moved aside and never replaced is put back)."""
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    for stale in parent.glob(f".{target.name}.new-*"):
        shutil.rmtree(stale, ignore_errors=True)
    aside = sorted(parent.glob(f".{target.name}.old-*"))
    if aside and not target.exists():
        os.rename(aside.pop(), target)  # a call stopped between its two renames: the old edition is still the edition
    for leftover in aside:
        shutil.rmtree(leftover, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=parent))
    try:
        staging.rmdir()  # fill (copytree) makes the folder itself
        fill(staging)
        moved: Path | None = None
        if target.exists():
            moved = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=parent))
            os.replace(target, moved)  # an empty folder is replaced by the old edition
        os.rename(staging, target)
        if moved is not None:
            shutil.rmtree(moved, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def archive(root: Path, edition: dict) -> Path:
    """Copy the rendered HTML to ``_build/editions/<id>/``, write exports, refresh the editions index. The copy is
    made beside the edition and renamed into its place: an interrupted or failed archive leaves the old edition
    whole (:func:`replace_folder`)."""
    editions = root / "_build" / "editions"
    target = editions / edition["id"]
    html_dir = root / "_build" / "html"  # the exports sit beside the book (each caption links its data there)
    write_exports(root / GENERATED, html_dir / EXPORTS, edition["id"], html_dir)
    replace_folder(target, lambda staging: shutil.copytree(html_dir, staging))
    index_path = editions / "editions.json"
    known = json.loads(index_path.read_text()) if index_path.is_file() else []
    known = [e for e in known if e["id"] != edition["id"]] + [
        {k: edition[k] for k in ("id", "built", "commit", "data_digest", "runs", "toolchain") if k in edition}
    ]
    atomic_write_json(index_path, known)
    items = "".join(
        f"<li><a href='{html.escape(e['id'])}/index.html'>{html.escape(e['id'])}</a> — built "
        f"{html.escape(e['built'])}, data {e['data_digest'][:8]}, runs: {len(e['runs'])} — "
        f"<a href='{html.escape(e['id'])}/exports/'>exports</a></li>"
        for e in reversed(known)
    )
    atomic_write_text(
        editions / "index.html",
        "<!doctype html><meta charset='utf-8'><title>verifylab editions</title>"
        f"<h1>verifylab editions</h1><p>Latest first. <code>_build/html</code> is the latest.</p>"
        f"<ul>{items}</ul>",
    )
    return target
