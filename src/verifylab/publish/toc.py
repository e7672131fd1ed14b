"""The book's ``_toc.yml`` at the project's root, where a Jupyter Book user looks for it: written from the chapter
registry and the stored runs (each has a page under the appendix) by every build and by ``make toc``;
``jupyter-book build .`` from the root reads the same file. ``python -m verifylab.publish.toc [--check]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from verifylab.chapters.registry import CHAPTERS, table_of_contents
from verifylab.iorw import atomic_write_text
from verifylab.publish.pages import source_pages
from verifylab.publish.paths import GENERATED

TOC_FILE = "_toc.yml"
ROOT_PAGE = "decision"


def stored_runs(root: Path) -> list[str]:
    """The runs of ``root``'s store that get a page: every folder of ``data/runs`` holding a manifest."""
    runs = root / "data" / "runs"
    return sorted(p.parent.name for p in runs.glob("*/manifest.json")) if runs.is_dir() else []


def toc_text(root: Path, runs: list[str] | None = None) -> str:
    """What ``_toc.yml`` must say for ``root``: the registry's chapters with their pages (read from their
    sources), the appendix, a page per run (``runs``: the pages a build wrote; default: the runs stored under
    ``root/data``)."""
    pages = {c.name: source_pages(c.notebook(root)) for c in CHAPTERS if c.notebook(root).is_file()}
    return table_of_contents(ROOT_PAGE, GENERATED.as_posix(), stored_runs(root) if runs is None else runs, pages)


def write_toc(root: Path, runs: list[str] | None = None) -> Path:
    """Write ``root/_toc.yml`` when it differs from :func:`toc_text` (temp + rename); its path."""
    path = root / TOC_FILE
    text = toc_text(root, runs)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        atomic_write_text(path, text)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description="Write (or --check) the book's _toc.yml from the chapter registry.")
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--check", action="store_true", help="exit 1 when _toc.yml differs (make toc writes it)")
    args = parser.parse_args()
    path = args.root / TOC_FILE
    if args.check:
        same = path.is_file() and path.read_text(encoding="utf-8") == toc_text(args.root)
        print(f"{path}: {'matches the registry' if same else 'differs from the registry: run make toc'}")
        sys.exit(0 if same else 1)
    print(write_toc(args.root))


if __name__ == "__main__":
    main()
