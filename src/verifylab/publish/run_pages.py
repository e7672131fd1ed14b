"""A page per measured run (``book/_generated/runs/<run_id>.md``) and their index: what a reviewer checks before
trusting a measured figure — the hardware and software it ran on, what it measured with which parameters and
environment, the tables it holds, its notes, and how to measure it again. Every figure's caption links its runs
here (``exhibit_sources``). Free text from a manifest is escaped by construction (HTML built with ``html.escape``,
in a raw block whose backticks are entities: ``report.section.raw_html_block``)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd

from verifylab.analysis.box_verify import cells_view
from verifylab.iorw import atomic_write_text
from verifylab.redact import redact_environment, redact_obj, redact_text
from verifylab.report.section import md_text, raw_html_block
from verifylab.report.tables import Table
from verifylab.store.manifest import Manifest
from verifylab.store.runs import RunStore

RUNS_FOLDER = "runs"  # under book/_generated
INDEX = "index"


def hardware_line(m: Manifest) -> str:
    """``2 x NVIDIA H200 (NVLink), SM 9.0`` or ``no GPU``."""
    if not m.gpu_name:
        return "no GPU"
    sm = f", SM {m.compute_capability}" if m.compute_capability else ""
    return f"{m.gpu_count} x {m.gpu_name} ({m.interconnect or 'interconnect not recorded'}){sm}"


def facts_frame(m: Manifest) -> pd.DataFrame:
    """The manifest's facts as (field, value) rows."""
    versions = m.versions.model_dump(exclude_none=True)
    rows = [
        ("label (every figure of the run carries it)", m.label),
        ("hardware", hardware_line(m)),
        ("host", m.host),
        ("made", m.created.strftime("%Y-%m-%d %H:%M UTC")),
        ("status", m.status),
        ("evidence", "mechanics only: never evidence for a deployment" if m.mechanics_only else "measured"),
        ("campaign", m.campaign),
        ("purpose", m.purpose),
        ("driver, CUDA", f"{m.driver or 'not recorded'}, {m.cuda or 'not recorded'}"),
        *((f"{name} version", str(value)) for name, value in sorted(versions.items())),
        ("verifylab commit", m.git_commit or "not recorded"),
        ("schema version", str(m.schema_version)),
    ]
    return pd.DataFrame([r for r in rows if r[1]], columns=["field", "value"])


def shown_manifest(m: Manifest) -> Manifest:
    """What of a manifest a page may show: its parameters, environment, notes and free-text fields passed through
    the one secret policy (:mod:`verifylab.redact`) again, whatever wrote the file (an old or edited manifest may
    hold a token the store would have refused)."""
    return m.model_copy(
        update={
            "parameters": redact_obj(m.parameters),
            "environment": redact_environment(m.environment),
            "notes": [redact_text(n) for n in m.notes],
            "label": redact_text(m.label),
            "purpose": redact_text(m.purpose),
            "host": redact_text(m.host),
            "topology": redact_text(m.topology) if m.topology else m.topology,
        }
    )


SHOWN_WHOLE = {"box_verify": "Predicted beside measured, per configuration and stream count"}  # tables a page shows
SHOWN_WHOLE_VIEW = {"box_verify": cells_view}  # as it shows them


def run_page(m: Manifest, shown: dict[str, pd.DataFrame] | None = None) -> str:
    """One run's page (MyST Markdown): its finding line first, then its facts, tables, parameters, environment,
    notes and how to measure it again; secrets redacted first (:func:`shown_manifest`). ``shown``: tables of
    :data:`SHOWN_WHOLE` the page shows whole (a box check's prediction beside its measurement)."""
    m = shown_manifest(m)
    whole = [
        part
        for name, frame in (shown or {}).items()
        for part in (f"## {SHOWN_WHOLE[name]}", "", raw_html_block(Table(frame)._repr_html_()))
    ]
    kind = "mechanics only (never evidence for a deployment)" if m.mechanics_only else "measured"
    opening = (
        f"Run `{m.run_id}` was made on {md_text(hardware_line(m))} on {m.created.strftime('%Y-%m-%d')}: "
        f"{md_text(m.label)}. Status {m.status}; {kind}. It holds {len(m.tables)} tables."
    )
    tables = pd.DataFrame(sorted(m.tables.items()), columns=["table", "file"])
    parameters = json.dumps(m.parameters, indent=1, sort_keys=True, default=str)
    environment = "\n".join(f"{k}={v}" for k, v in sorted(m.environment.items())) or "none recorded"
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in m.notes) or "<li>none</li>"
    return "\n".join(
        [
            f"# Run {m.run_id}",
            "",
            opening,
            "",
            raw_html_block(Table(facts_frame(m))._repr_html_()),
            *whole,
            "## Tables it holds",
            "",
            raw_html_block(Table(tables)._repr_html_()),
            "## Parameters and environment",
            "",
            raw_html_block(
                f"<pre>{html.escape(parameters)}</pre><p>Environment</p><pre>{html.escape(environment)}</pre>"
                f"<p>Topology (as the host reported it)</p><pre>{html.escape(m.topology or 'not recorded')}</pre>"
            ),
            "## Notes",
            "",
            raw_html_block(f"<ul>{notes}</ul>"),
            "## Measure it again",
            "",
            "On a box like this one, the chapter that made the run measures it again in live mode "
            "(`verifylab run --params PARAMS` with these parameters); the book's figures then read the new run.",
            "",
        ]
    )


def index_page(manifests: list[Manifest]) -> str:
    """The index of run pages: one line per run, newest first, each a link to its page."""
    lines = [
        f"- [{m.run_id}]({m.run_id}.md): {md_text(hardware_line(m))}; {md_text(m.label)}; "
        f"made {m.created.strftime('%Y-%m-%d')}, {m.status}"
        for m in sorted(manifests, key=lambda m: m.created, reverse=True)
    ]
    return (
        "# Measured runs\n\nEvery run stored in this edition's data folder, newest first; each has a page with its "
        "hardware, software, parameters and tables, and every figure's caption links the runs it shows.\n\n"
        + "\n".join(lines)
        + "\n"
    )


def write_run_pages(folder: Path, store: RunStore) -> list[str]:
    """Write the index and one page per stored run into ``folder``; pages of runs no longer stored are removed.
    Returns the run ids, sorted."""
    manifests = store.manifests()
    folder.mkdir(parents=True, exist_ok=True)
    ids = [m.run_id for m in manifests]
    for stale in folder.glob("*.md"):
        if stale.stem not in {*ids, INDEX}:
            stale.unlink()
    for m in manifests:
        shown = {
            name: SHOWN_WHOLE_VIEW[name](store.read_table(m.run_id, name)) for name in SHOWN_WHOLE if name in m.tables
        }
        atomic_write_text(folder / f"{m.run_id}.md", run_page(m, shown))
    atomic_write_text(folder / f"{INDEX}.md", index_page(manifests))
    return sorted(ids)
