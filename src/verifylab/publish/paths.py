"""Where the book's generated files live, relative to the project root (and to the rendered HTML): one
spelling for every module that writes or reads them."""

from __future__ import annotations

import re
from pathlib import Path

GENERATED = Path("book") / "_generated"  # executed chapters, the decision page, edition.json
EDITION_FILE = GENERATED / "edition.json"
EXPORTS = "exports"  # the design-review exports, beside the book's index.html and in each archived edition


def export_stem(number: str, anchor: str) -> str:
    """An exhibit's export files' stem from its printed number and anchor: ``Fig. 4.1`` + ``tbl-decision-regimes``
    -> ``fig-4-1-tbl-decision-regimes`` (the anchor alone where the exhibit has no number)."""
    slug = re.sub(r"[^a-z0-9]+", "-", number.lower()).strip("-")
    return f"{slug}-{anchor}" if slug else anchor
