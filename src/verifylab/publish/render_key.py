"""What a rendered edition is made from, input by input, so that a build whose inputs are all unchanged renders
nothing (the HTML, the charts, the exports and the PDFs are kept, as unchanged chapters are), and a build that
renders says which inputs changed: the executed chapters, the book's own pages and configuration, verifylab's
code, the data, the toolchain, the commit the edition is named after, and what prints the PDFs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from verifylab.iorw import atomic_write_json, sha256_of
from verifylab.publish.edition import git_head
from verifylab.publish.paths import GENERATED
from verifylab.publish.pdf import chromium
from verifylab.publish.toolchain import toolchain_versions
from verifylab.store.digests import code_digest, data_digest

RECORD = Path("_build") / ".render-inputs.json"  # beside the HTML it describes: removed with it by make clean
BOOK_SOURCES = ("_config.yml", "book/*.md", "book/_static/*", "book/editions.json")


def render_inputs(root: Path, data_dir: Path, chapter_names: list[str]) -> dict[str, str]:
    """Each input of the rendered edition by name, with its digest (or value)."""
    inputs = {
        "verifylab's code": code_digest(),
        "the toolchain": json.dumps(toolchain_versions(), sort_keys=True),
        "the data": data_digest(data_dir),
        "the commit": git_head(root),
        "the PDF printer": f"{chromium()} with playwright {importlib.util.find_spec('playwright') is not None}",
    }
    for name in chapter_names:
        executed = root / GENERATED / f"{name}.ipynb"
        inputs[f"chapter {name}"] = sha256_of(executed) if executed.is_file() else "missing"
    for pattern in BOOK_SOURCES:
        for path in sorted(root.glob(pattern)):
            if path.is_file():
                inputs[path.relative_to(root).as_posix()] = sha256_of(path)
    return inputs


def changed_inputs(before: dict[str, str] | None, now: dict[str, str]) -> list[str]:
    """Which inputs differ from the last render's, in words (``the data changed``); [] when none does."""
    if before is None:
        return ["no earlier render recorded"]
    return [f"{name} changed" for name in sorted(set(before) | set(now)) if before.get(name) != now.get(name)]


def last_render(root: Path) -> dict | None:
    """The last render's record ({"inputs", "edition_dir", "pdfs", "pdf_note"}), or None when there is none to
    trust (no file, an unreadable one, or one whose outputs are gone)."""
    try:
        record = json.loads((root / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("inputs"), dict):
        return None
    outputs = [root / "_build" / "html" / "index.html", Path(str(record.get("edition_dir", "")))]
    outputs += [Path(p) for p in record.get("pdfs", [])]
    return record if all(p.is_file() or p.is_dir() for p in outputs) else None


def record_render(root: Path, inputs: dict[str, str], edition_dir: Path, pdfs: list[Path], pdf_note: str) -> None:
    """Record what the render just made was made from (written whole, after the render)."""
    record = {"inputs": inputs, "edition_dir": str(edition_dir), "pdfs": [str(p) for p in pdfs], "pdf_note": pdf_note}
    atomic_write_json(root / RECORD, record)
