"""Public per-context decode matrices: ``data/reference/public_context.csv``, one row per matrix, context and stream
count with plain and speculative aggregate tok/s as a public page reports them (a speculative cell the page skips
left empty), the box, engine and attention backend they ran on, the chain, the accept length (derived, with how),
the KV pools the page states, the page's URL pinned to a commit, the table's date, and verbatim quotes of at most 30
words (a table row) that carry each number. What the model fits on and what it holds out is decided in
:mod:`verifylab.model.fits.context`, by a rule, not here."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from verifylab.errors import ReferenceDataError
from verifylab.store.public import (
    RATE_COLUMNS,
    blank,
    check_quote,
    checked_number,
    load_rate_table,
    refuse_duplicate_ids,
    refuse_speedup_past_accept,
    refuse_speedup_past_chain,
)

PUBLIC_CONTEXT_FILE = Path("reference") / "public_context.csv"
COLUMNS = [
    "id",
    "matrix",
    "model",
    "config",
    "gpu",
    "gpus",
    "interconnect",
    "engine",
    "attention",
    "kv_dtype",
    "dcp",
    "drafter",
    "verify_tokens",
    "accept_low",
    "accept_high",
    "accept_note",
    "kv_pool_plain_tokens",
    "kv_pool_spec_tokens",
    "context",
    "context_label",
    *RATE_COLUMNS,
    "quote_pool_plain",
    "quote_pool_spec",
    "note",
]
OPTIONAL = {"spec_tok_s", "quote_spec", "kv_pool_plain_tokens", "kv_pool_spec_tokens", "quote_pool_plain",
            "quote_pool_spec", "note"}  # fmt: skip
NUMBERS = {  # column: (smallest, largest)
    "gpus": (1, 64),
    "dcp": (1, 64),
    "verify_tokens": (2, 64),
    "accept_low": (1.0, 64.0),
    "accept_high": (1.0, 64.0),
    "context": (1, 1 << 21),
    "streams": (1, 4096),
    "plain_tok_s": (1e-3, 1e7),
}
OPTIONAL_NUMBERS = {"spec_tok_s": (1e-3, 1e7), "kv_pool_plain_tokens": (1, 1e10), "kv_pool_spec_tokens": (1, 1e10)}
PER_MATRIX = [
    *("model", "config", "gpu", "gpus", "interconnect", "engine", "attention", "kv_dtype", "dcp", "drafter"),
    *("verify_tokens", "accept_low", "accept_high", "kv_pool_plain_tokens", "kv_pool_spec_tokens", "url"),
]
PINNED = re.compile(r"^https://github\.com/[^/]+/[^/]+/blob/[0-9a-f]{40}/")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def check_public_context(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """Every row well formed (numbers in range; an accept range within the chain, at most the speculative rate's
    gain can carry; a URL pinned to a commit and ISO dates; quotes of at most 30 words that carry each rate and pool),
    one box per matrix, unique ids and cells. One error naming the line and field otherwise."""
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ReferenceDataError(f"{source}: missing column(s) {', '.join(missing)}")
    for line, row in enumerate(frame.to_dict("records"), start=2):
        where = f"{source}: line {line} ({row.get('id') or '?'})"
        empty = [c for c in COLUMNS if c not in OPTIONAL and blank(row[c])]
        if empty:
            raise ReferenceDataError(f"{where}: empty field(s) {', '.join(empty)}")
        for field, (low, high) in NUMBERS.items():
            checked_number(row[field], field, low, high, where)
        for field, (low, high) in OPTIONAL_NUMBERS.items():
            if not blank(row[field]):
                checked_number(row[field], field, low, high, where)
        if not float(row["accept_low"]) <= float(row["accept_high"]) <= float(row["verify_tokens"]):
            raise ReferenceDataError(f"{where}: accept_low <= accept_high <= verify_tokens does not hold")
        if not blank(row["spec_tok_s"]):
            plain, spec = float(row["plain_tok_s"]), float(row["spec_tok_s"])
            refuse_speedup_past_chain(plain, spec, int(float(row["verify_tokens"])), where)
            refuse_speedup_past_accept(plain, spec, float(row["accept_high"]), where)
        if not PINNED.match(str(row["url"])):
            raise ReferenceDataError(f"{where}: url '{row['url']}' is not a GitHub file pinned to a commit")
        for field in ("published", "retrieved"):
            if not DATE.match(str(row[field])):
                raise ReferenceDataError(f"{where}: {field} '{row[field]}' is not a date YYYY-MM-DD")
        for quote, value in (
            ("quote_plain", row["plain_tok_s"]),
            ("quote_spec", row["spec_tok_s"]),
            ("quote_pool_plain", row["kv_pool_plain_tokens"]),
            ("quote_pool_spec", row["kv_pool_spec_tokens"]),
        ):
            if blank(value):
                continue
            check_quote(str(row[quote]), value, quote, where)
    refuse_duplicate_ids(frame, source)
    if frame.duplicated(subset=["matrix", "context", "streams"]).any():
        raise ReferenceDataError(f"{source}: a matrix lists one context and stream count twice")
    for matrix, part in frame.groupby("matrix"):
        varying = [c for c in PER_MATRIX if part[c].astype(str).nunique() > 1]
        if varying:
            raise ReferenceDataError(f"{source}: matrix '{matrix}' changes {', '.join(varying)} between its rows")
    return frame


def load_public_context(data_dir: Path | str) -> pd.DataFrame:
    """The checked table with numbers as numbers and ``provenance='reported (public)'``; empty where absent."""
    return load_rate_table(
        Path(data_dir) / PUBLIC_CONTEXT_FILE,
        COLUMNS,
        check_public_context,
        [*NUMBERS, *OPTIONAL_NUMBERS],
        ("gpus", "dcp", "verify_tokens", "context", "streams"),
    )
