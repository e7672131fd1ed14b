"""Public end-to-end speculation curves: ``data/reference/public_speculation.csv``, one row per curve and stream count
with plain and speculative tok/s as a public page reports them (the speculative side empty where only plain decoding
was measured), the box they ran on, the drafter, the accept length (reported or derived, with how), the page's URL
and date, and verbatim quotes of at most 30 words that carry each number. A curve's ``role`` says what the model
does with it: ``fit`` (the routing overlap is fitted on it), ``held out`` (another model's curve it predicts) or
``family check`` (the case-study model's family: never in a fit, only predicted)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from verifylab.errors import ReferenceDataError
from verifylab.store import public

PUBLIC_SPECULATION_FILE = Path("reference") / "public_speculation.csv"
COLUMNS = [
    "id",
    "curve",
    "role",
    "model",
    "config",
    "gpu",
    "gpus",
    "interconnect",
    "engine",
    "drafter",
    "verify_tokens",
    "accept_low",
    "accept_high",
    "accept_note",
    "context",
    *public.RATE_COLUMNS,
    "note",
]
ROLES = ("fit", "held out", "family check")
FAMILY_CONFIG = "kimi-k2.5"  # the case study's model: its family's curves check the model, never fit it
INTERCONNECTS = {"nvlink", "healthy P2P"}
DRAFTERS = {"eagle3", "mtp"}
NUMBERS = {  # column: (smallest, largest)
    "gpus": (1, 64),
    "verify_tokens": (2, 64),
    "accept_low": (1.0, 64.0),
    "accept_high": (1.0, 64.0),
    "context": (1, 1 << 21),
    "streams": (1, 4096),
    "plain_tok_s": (1e-3, 1e7),
}
PER_CURVE = ["role", "model", "config", "gpu", "gpus", "interconnect", "engine", "drafter", "verify_tokens", "url"]


def check_public_speculation(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """Every row well formed (known role, interconnect and drafter; numbers in range; an accept range within the
    chain; quotes of at most 30 words that carry the plain and speculative rates), one box per curve, unique ids and
    stream counts, and the case-study family's curves only as family checks. One error naming the line otherwise."""
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ReferenceDataError(f"{source}: missing column(s) {', '.join(missing)}")
    for line, row in enumerate(frame.to_dict("records"), start=2):
        where = f"{source}: line {line} ({row.get('id') or '?'})"
        empty = [c for c in COLUMNS if c not in ("spec_tok_s", "quote_spec", "note") and public.blank(row[c])]
        if empty:
            raise ReferenceDataError(f"{where}: empty field(s) {', '.join(empty)}")
        for field, allowed in (("role", set(ROLES)), ("interconnect", INTERCONNECTS), ("drafter", DRAFTERS)):
            if row[field] not in allowed:
                raise ReferenceDataError(f"{where}: {field} '{row[field]}' is not one of {sorted(allowed)}")
        for field, (low, high) in NUMBERS.items():
            public.checked_number(row[field], field, low, high, where)
        if not float(row["accept_low"]) <= float(row["accept_high"]) <= float(row["verify_tokens"]):
            raise ReferenceDataError(f"{where}: accept_low <= accept_high <= verify_tokens does not hold")
        if (row["config"] == FAMILY_CONFIG) != (row["role"] == "family check"):
            raise ReferenceDataError(
                f"{where}: the case study's family ({FAMILY_CONFIG}) is a family check, and only it: never in a fit"
            )
        if not str(row["url"]).startswith(("https://", "http://")):
            raise ReferenceDataError(f"{where}: url '{row['url']}' is not an http(s) address")
        for quote, value in (("quote_plain", row["plain_tok_s"]), ("quote_spec", row["spec_tok_s"])):
            if quote == "quote_spec" and public.blank(value):
                continue
            if quote == "quote_spec":
                spec = public.checked_number(value, "spec_tok_s", *NUMBERS["plain_tok_s"], where)
                chain = int(float(row["verify_tokens"]))
                public.refuse_speedup_past_chain(float(row["plain_tok_s"]), spec, chain, where)
            public.check_quote(str(row[quote]), value, quote, where)
    public.refuse_duplicate_ids(frame, source)
    if frame.duplicated(subset=["curve", "streams"]).any():
        raise ReferenceDataError(f"{source}: a curve lists one stream count twice")
    for curve, part in frame.groupby("curve"):
        varying = [c for c in PER_CURVE if part[c].astype(str).nunique() > 1]
        if varying:
            raise ReferenceDataError(f"{source}: curve '{curve}' changes {', '.join(varying)} between its rows")
        if part["spec_tok_s"].map(public.blank).all():
            raise ReferenceDataError(f"{source}: curve '{curve}' has no speculative rate")
    return frame


def load_public_speculation(data_dir: Path | str) -> pd.DataFrame:
    """The checked table with numbers as numbers and ``provenance='reported (public)'``; empty where absent."""
    return public.load_rate_table(
        Path(data_dir) / PUBLIC_SPECULATION_FILE,
        COLUMNS,
        check_public_speculation,
        [*NUMBERS, "spec_tok_s"],
        ("gpus", "verify_tokens", "streams"),
    )
