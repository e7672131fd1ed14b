"""Public measurements, the fourth kind of evidence beside measured (here), reported (the case study) and
modelled: ``data/reference/public_measurements.csv``, one row per figure with value, unit, world size, message
size, implementation, transport, regime, hardware, software, method, dates, URL and a verbatim quote of at most
30 words that carries the number. Figures carry over from the sources; their code and prose do not."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from verifylab.csv_cells import is_text_column
from verifylab.errors import ReferenceDataError
from verifylab.intake import OutsideFileError, read_outside_text
from verifylab.iorw import file_exists
from verifylab.redact import redact_text, strip_terminal_codes
from verifylab.vocab import Regime

PUBLIC_FILE = Path("reference") / "public_measurements.csv"
PROVENANCE = "reported (public)"
RATE_COLUMNS = (  # a public speculation table's cell: plain and speculative tok/s at a stream count, where, the quotes
    "streams", "plain_tok_s", "spec_tok_s", "published", "retrieved", "url", "quote_plain", "quote_spec",
    "quote_accept",
)  # fmt: skip
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
REGIMES = {r.value for r in (Regime.HEALTHY_P2P, Regime.NCCL_SLOW, Regime.DEGRADED, Regime.HOST_MEMORY, Regime.SOCKET)}
TRANSPORTS = {"P2P", "SHM", "NET"}
UNITS = {"us", "GB/s", "tok/s", "ms"}
MAX_QUOTE_WORDS = 30
# Physics a public figure cannot beat (issue 70): no link moves more into one GPU than NVLink 5 per direction; no GPU
# signals another faster than a tenth of a microsecond (a PCIe round trip is about half a microsecond); no transport
# an all-reduce would use is slower than a second plus 10 MB/s; no box decodes a million tokens a second.
WIRE_BYTES_PER_S = 900e9
MIN_LATENCY_US = 0.1
# Over PCIe (a P2P or SHM row on a box without NVLink): no write reaches a peer in under 0.3 µs (the public one-way
# latency is 0.36-0.45 µs), no all-reduce beats a round trip of two, and none moves its bytes faster than a PCIe 5.0
# x16 link (64 GB/s a direction)
PCIE_ONE_WAY_US, PCIE_BYTES_PER_S = 0.3, 64e9
SLOWEST_SECONDS, SLOWEST_BYTES_PER_S = 0.05, 10e6  # no transport takes 50 ms over its bytes at 10 MB/s
MAX_TOK_S = 1e6
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")


def quote_carries(quote: str, value: float) -> bool:
    """Whether ``quote`` contains ``value`` as a number (``26.20`` carries 26.2; ``0.36-0.45`` carries 0.45)."""
    return any(abs(float(n) - value) <= 1e-9 * max(1.0, abs(value)) for n in _NUMBER.findall(quote.replace(",", "")))


def blank(value: object) -> bool:
    """A cell a reference table leaves empty (None, NaN or only spaces)."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == ""


def checked_number(raw: object, field: str, low: float, high: float, where: str) -> float:
    """``raw`` as a finite number in ``low..high``, or one error naming the row and the field."""
    try:
        number = float(str(raw))
    except ValueError:
        raise ReferenceDataError(f"{where}: {field} {str(raw)[:20]!r} is not a number") from None
    if not (math.isfinite(number) and low <= number <= high):
        raise ReferenceDataError(f"{where}: {field} {number!r} is not a finite number in {low:g}..{high:g}")
    return number


def check_quote(text: str, value: object, field: str, where: str) -> None:
    """A verbatim quote of at most :data:`MAX_QUOTE_WORDS` words that carries ``value``, or one error naming it."""
    if len(text.split()) > MAX_QUOTE_WORDS:
        raise ReferenceDataError(f"{where}: {field} has more than {MAX_QUOTE_WORDS} words")
    if not quote_carries(text, float(str(value))):
        raise ReferenceDataError(f"{where}: {field} does not carry the value {value}")


def refuse_duplicate_ids(frame: pd.DataFrame, source: str) -> None:
    """One error naming the ids a reference table lists twice."""
    if frame["id"].duplicated().any():
        raise ReferenceDataError(f"{source}: duplicate id(s) {frame.loc[frame['id'].duplicated(), 'id'].tolist()}")


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
        refuse_unphysical(row, where)
        if not str(row["url"]).startswith(("https://", "http://")):
            raise ReferenceDataError(f"{where}: url '{row['url']}' is not an http(s) address")
        check_quote(str(row["quote"]), row["value"], "quote", where)
    refuse_duplicate_ids(frame, source)
    return frame


def latency_bounds_us(
    world_size: int, message_bytes: float | None, pcie: bool = False, round_trip: bool = False
) -> tuple[float, float]:
    """The fastest and slowest an all-reduce of ``message_bytes`` among ``world_size`` GPUs can physically take, in
    µs: each GPU moves 2(n-1)/n of the message through a link no faster than NVLink 5 (``pcie``: a PCIe 5.0 x16 link,
    and never under a PCIe write, or two for a ``round_trip``; else no signal is quicker than
    :data:`MIN_LATENCY_US`); no transport is slower than :data:`SLOWEST_SECONDS` plus :data:`SLOWEST_BYTES_PER_S`."""
    size = message_bytes or 0.0
    moved = 2 * (world_size - 1) / world_size * size if world_size > 1 else size
    pcie_floor = PCIE_ONE_WAY_US * (2 if round_trip else 1)
    wire, signal = (PCIE_BYTES_PER_S, pcie_floor) if pcie else (WIRE_BYTES_PER_S, MIN_LATENCY_US)
    floor = max(signal, moved / wire * 1e6)
    return floor, (SLOWEST_SECONDS + size / SLOWEST_BYTES_PER_S) * 1e6


def refuse_unphysical(row: dict, where: str) -> None:
    """A public row physics rules out (a latency under the wire's floor for its size or over any transport's
    ceiling, a bandwidth over the fastest link, a rate no box reaches): one error naming the row."""
    value, unit = float(row["value"]), str(row["unit"])
    raw_bytes = row.get("message_bytes")
    size = None if raw_bytes is None or str(raw_bytes).strip() == "" or pd.isna(raw_bytes) else float(raw_bytes)
    if unit in ("us", "ms"):
        us = value * (1000.0 if unit == "ms" else 1.0)
        pcie = str(row.get("transport")) in ("P2P", "SHM") and "nvlink" not in str(row.get("hardware", "")).lower()
        collective = str(row.get("implementation")) != "gpu_to_gpu_latency"  # an all-reduce: a round trip at least
        low, high = latency_bounds_us(int(float(row["world_size"])), size, pcie, collective)
        if not low <= us <= high:
            side = "below the wire's floor" if us < low else "above the slowest transport's ceiling"
            raise ReferenceDataError(
                f"{where}: {value:g} {unit} for {size or 0:,.0f} bytes on {int(float(row['world_size']))} GPUs is "
                f"{side} ({low:.3g}..{high:.3g} µs): not a physical measurement"
            )
    elif unit == "GB/s" and value * 1e9 > WIRE_BYTES_PER_S:
        raise ReferenceDataError(
            f"{where}: {value:g} GB/s is more than the fastest link moves ({WIRE_BYTES_PER_S / 1e9:g} GB/s)"
        )
    elif unit == "tok/s" and value > MAX_TOK_S:
        raise ReferenceDataError(f"{where}: {value:g} tok/s is more than any box decodes ({MAX_TOK_S:g})")


def refuse_speedup_past_accept(plain_tok_s: float, spec_tok_s: float, accept: float, where: str) -> None:
    """A cycle emits ``accept`` tokens on average and costs at least a plain step: a speedup past the accept length
    the row states is one error naming the row."""
    if spec_tok_s > accept * plain_tok_s:
        raise ReferenceDataError(
            f"{where}: speculation at {spec_tok_s:g} tok/s against {plain_tok_s:g} plain is a "
            f"{spec_tok_s / plain_tok_s:.2f}x speedup, past the accept length {accept:g} it states: not physical"
        )


def refuse_speedup_past_chain(plain_tok_s: float, spec_tok_s: float, verify_tokens: int, where: str) -> None:
    """Speculation cannot emit more tokens per cycle than it verifies, and a cycle costs at least a plain step: a
    speedup past ``verify_tokens`` is one error naming the row."""
    if spec_tok_s > verify_tokens * plain_tok_s:
        raise ReferenceDataError(
            f"{where}: speculation at {spec_tok_s:g} tok/s against {plain_tok_s:g} plain is a "
            f"{spec_tok_s / plain_tok_s:.1f}x speedup, past the {verify_tokens} tokens a cycle can emit at most "
            "(verify_tokens): not physical"
        )


def read_reference_table(path: Path, **read_csv: Any) -> pd.DataFrame:
    """A reference CSV read as a file from outside (bounded, a regular file), or one error naming it."""
    try:
        text = read_outside_text(path, "table")
        return pd.read_csv(io.StringIO(text), **read_csv)
    except OutsideFileError as exc:
        raise ReferenceDataError(str(exc)) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ReferenceDataError(f"{path}: unreadable ({' '.join(str(exc).split())[:160]})") from None


def without_secrets(frame: pd.DataFrame, numeric: set[str] | frozenset[str] = frozenset()) -> pd.DataFrame:
    """A checked public table with every text cell through the one detector (``redact.redact_text``): a row's
    hardware, software, method, note, quote or URL reaches no page, export or PDF with a credential in it; numbers,
    the row's id and a pinned URL read the same. Each distinct text is read once (a table repeats its hardware,
    software and URL on every row)."""
    out = frame.copy()
    for column in out.columns:
        if column in numeric or not is_text_column(out[column]):
            continue
        clean = {v: redact_text(strip_terminal_codes(v)) for v in set(out[column].tolist()) if isinstance(v, str)}
        out[column] = out[column].map(lambda v, clean=clean: clean[v] if isinstance(v, str) else v)
    return out


def load_public_measurements(data_dir: Path | str) -> pd.DataFrame:
    """The checked public table with ``provenance='reported (public)'``; empty (with its columns) where absent."""
    path = Path(data_dir) / PUBLIC_FILE
    if not file_exists(path):
        return pd.DataFrame(columns=[*COLUMNS, "provenance"])
    frame = read_reference_table(path, keep_default_na=False, na_values={"value": [""], "message_bytes": [""]})
    frame = without_secrets(check_public(frame, str(path)), {"value", "message_bytes", "world_size"})
    frame["value"] = pd.to_numeric(frame["value"])
    frame["message_bytes"] = pd.to_numeric(frame["message_bytes"])
    frame["provenance"] = PROVENANCE
    return frame


def load_rate_table(
    path: Path,
    columns: list[str],
    check: Callable[[pd.DataFrame, str], pd.DataFrame],
    numbers: list[str],
    whole: tuple[str, ...],
) -> pd.DataFrame:
    """A public speculation table at ``path`` read as text, checked by ``check``, its text through the one detector,
    ``numbers`` as numbers (``whole`` as integers) and ``provenance='reported (public)'``; empty where absent."""
    if not file_exists(path):
        return pd.DataFrame(columns=[*columns, "provenance"])
    frame = check(read_reference_table(path, dtype=str, keep_default_na=False), str(path))
    frame = without_secrets(frame, set(numbers))
    for column in numbers:
        frame[column] = pd.to_numeric(frame[column].replace("", float("nan")))
    for column in whole:
        frame[column] = frame[column].astype(int)
    frame["provenance"] = PROVENANCE
    return frame


def public_measurements_or_none(data_dir: Path) -> pd.DataFrame | None:
    """The public table of ``data_dir``, or None where it has none (a probe then decides by transport alone)."""
    frame = load_public_measurements(data_dir)
    return None if frame.empty else frame
