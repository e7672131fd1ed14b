"""Where the book's generated files live, relative to the project root (and to the rendered HTML): one
spelling for every module that writes or reads them."""

from __future__ import annotations

from pathlib import Path

GENERATED = Path("book") / "_generated"  # executed chapters, the decision page, edition.json
EDITION_FILE = GENERATED / "edition.json"
