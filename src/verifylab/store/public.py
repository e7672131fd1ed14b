"""Public measurements, the fourth kind of evidence beside measured (here), reported (the case study) and
modelled: ``data/reference/public_measurements.csv``, one row per figure with value, unit, world size, message
size, implementation, transport, regime, hardware, software, method, dates, URL and a verbatim quote of at most
30 words that carries the number. Figures carry over from the sources; their code and prose do not."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from verifylab.errors import ReferenceDataError
from verifylab.intake import OutsideFileError, read_outside_text
from verifylab.iorw import file_exists

PUBLIC_FILE = Path("reference") / "public_measurements.csv"
PROVENANCE = "reported (public)"
COLUMNS = [
    "id",
    "value",
    "unit",
    "world_size",
    "message_bytes",
    "implementation",
    "transport",
    "regime",
    "hardware",
    "software",
    "method",
    "published",
    "retrieved",
    "url",
    "quote",
    "derivation",
    "note",
]
REQUIRED = [c for c in COLUMNS if c not in ("message_bytes", "software", "note")]  # the rest may be empty
REGIMES = {"healthy P2P", "host-memory fallback", "socket", "degraded"}
TRANSPORTS = {"P2P", "SHM", "NET"}
UNITS = {"us", "GB/s", "tok/s", "ms"}
MAX_QUOTE_WORDS = 30
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")


def quote_carries(quote: str, value: float) -> bool:
    """Whether ``quote`` contains ``value`` as a number (``26.20`` carries 26.2; ``0.36-0.45`` carries 0.45)."""
    return any(abs(float(n) - value) <= 1e-9 * max(1.0, abs(value)) for n in _NUMBER.findall(quote.replace(",", "")))


def check_public(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """Every row well formed: required fields present, known regime/transport/unit, an http(s) URL, a quote of
    at most 30 words that carries the value, unique ids. One error naming the file, line and field otherwise."""
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ReferenceDataError(f"{source}: missing column(s) {', '.join(missing)}")
    for line, row in enumerate(frame.to_dict("records"), start=2):
        where = f"{source}: line {line} ({row.get('id') or '?'})"
        empty = [c for c in REQUIRED if pd.isna(row[c]) or str(row[c]).strip() == ""]
        if empty:
            raise ReferenceDataError(f"{where}: empty field(s) {', '.join(empty)}")
        for field, allowed in (("regime", REGIMES), ("transport", TRANSPORTS), ("unit", UNITS)):
            if row[field] not in allowed:
                raise ReferenceDataError(f"{where}: {field} '{row[field]}' is not one of {sorted(allowed)}")
        for field, low, high in (("value", 0.0, 1e9), ("world_size", 1, 1024), ("message_bytes", 1, 1 << 40)):
            raw = row.get(field)
            if field == "message_bytes" and (raw is None or str(raw).strip() == "" or pd.isna(raw)):
                continue  # a bandwidth or a rate has no message size
            try:
                number = float(raw)
            except (TypeError, ValueError):
                raise ReferenceDataError(f"{where}: {field} {str(raw)[:20]!r} is not a number") from None
            if not (math.isfinite(number) and low <= number <= high and (field != "value" or number > 0)):
                raise ReferenceDataError(f"{where}: {field} {number!r} is not a finite number in {low:g}..{high:g}")
        if not str(row["url"]).startswith(("https://", "http://")):
            raise ReferenceDataError(f"{where}: url '{row['url']}' is not an http(s) address")
        if len(str(row["quote"]).split()) > MAX_QUOTE_WORDS:
            raise ReferenceDataError(f"{where}: quote has more than {MAX_QUOTE_WORDS} words")
        if not quote_carries(str(row["quote"]), float(row["value"])):
            raise ReferenceDataError(f"{where}: quote does not carry the value {row['value']}")
    if frame["id"].duplicated().any():
        raise ReferenceDataError(f"{source}: duplicate id(s) {frame.loc[frame['id'].duplicated(), 'id'].tolist()}")
    return frame


def read_reference_table(path: Path, **read_csv: Any) -> pd.DataFrame:
    """A reference CSV read as a file from outside (bounded, a regular file), or one error naming it."""
    try:
        text = read_outside_text(path, "table")
        return pd.read_csv(io.StringIO(text), **read_csv)
    except OutsideFileError as exc:
        raise ReferenceDataError(str(exc)) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ReferenceDataError(f"{path}: unreadable ({' '.join(str(exc).split())[:160]})") from None


def load_public_measurements(data_dir: Path | str) -> pd.DataFrame:
    """The checked public table with ``provenance='reported (public)'``; empty (with its columns) where absent."""
    path = Path(data_dir) / PUBLIC_FILE
    if not file_exists(path):
        return pd.DataFrame(columns=[*COLUMNS, "provenance"])
    frame = read_reference_table(path, keep_default_na=False, na_values={"value": [""], "message_bytes": [""]})
    frame = check_public(frame, str(path))
    frame["value"] = pd.to_numeric(frame["value"])
    frame["message_bytes"] = pd.to_numeric(frame["message_bytes"])
    frame["provenance"] = PROVENANCE
    return frame


def public_measurements_or_none(data_dir: Path) -> pd.DataFrame | None:
    """The public table of ``data_dir``, or None where it has none (a probe then decides by transport alone)."""
    frame = load_public_measurements(data_dir)
    return None if frame.empty else frame
