"""Stream the events of a Chrome-format profiler trace (``.json`` or ``.json.gz``) without loading it.

The file is read as bytes in chunks; the whole events of a chunk are decoded at once into typed records (msgspec,
``iter_batches``), and one at a time, with the exact byte of an error, only where that fails. The analysis keeps
device kernels as columns (``columns``) and the few other events it needs as small :class:`Event` objects
(``to_event``). Memory stays at one chunk plus what is kept.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import msgspec

from verifylab.errors import TraceError

# bytes decoded and typed a chunk at a time: what a reading process holds beyond its results. Small enough that a
# chunk's records are still in the CPU's cache when the reading loop walks them: 512 KiB took a third less CPU than
# 4 MiB on a 500 MB trace (user time, median of 5; benchmarks/trace_throughput.py shows the whole summary)
CHUNK = 512 << 10
MAX_EXPANSION = 100  # a gzip trace compresses 5-20x; 100x and more is a bomb, not a trace
HEAD_BYTES = 1 << 20  # what every rank's file is checked for before any is read to its end
TAIL_BYTES = 1 << 20  # ... and, uncompressed, at its end
# Between two events on their own lines: a literal line break never stands inside a JSON string, so this is a
# boundary wherever it is found (Kineto and SGLang write one event per line).
_LINE_BOUNDARY = re.compile(rb"\},[ \t\r]*\n[ \t\r\n]*\{")
_AT_BYTE = re.compile(r"at byte (\d+)")
MAX_EVENT_CHARS = 4 << 20  # no trace event is this many bytes long: a decode error with more text after it is real
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_DECODER = json.JSONDecoder()
_WS = b" \t\r\n"
_SEPARATORS = re.compile(rb"[ \t\r\n,]*")
_CLOSE = ord("]")
_FIRST_WINDOW = 4096  # bytes decoded to text for one event on the slow path (most events are far shorter)
# the args the analysis reads: a graph launch's correlation id, a collective's kind and message size
KEPT_ARGS = ("correlation", "Collective name", "In msg nelems", "dtype")
NO_CORRELATION = -1
NO_ARGS: Mapping = MappingProxyType({})  # shared by the many events that keep none


_ARG_FIELDS = {"correlation": "correlation", "Collective name": "collective_name", "In msg nelems": "in_msg_nelems"}
_ARG_FIELDS["dtype"] = "dtype"


class RawArgs(msgspec.Struct, gc=False):
    """The args of a trace event the analysis reads (:data:`KEPT_ARGS`); the others are never decoded."""

    correlation: Any = None
    collective_name: Any = msgspec.field(default=None, name="Collective name")
    in_msg_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    dtype: Any = None

    def kept(self) -> dict[str, Any]:
        """The args as the analysis keeps them (names as in the trace; absent ones left out)."""
        if self.collective_name is None and self.in_msg_nelems is None and self.dtype is None:
            return {} if self.correlation is None else {"correlation": self.correlation}
        return {key: value for key, attr in _ARG_FIELDS.items() if (value := getattr(self, attr)) is not None}


class RawEvent(msgspec.Struct, gc=False):
    """One trace event as the reader yields it: the fields the analysis reads (any JSON value each: times are
    checked by :func:`event_time`), None where the event has none. ``gc=False``: a million of them are not
    tracked by the garbage collector (three times faster to decode)."""

    ph: Any = None
    cat: str | None = None  # a list or a number here sends the chunk to the checked path, which drops it
    name: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None
    args: RawArgs | None = None


_BATCH = msgspec.json.Decoder(list[RawEvent])


def _record(obj: Any) -> RawEvent:
    """An event decoded as a dict (the one-at-a-time path) as the same record the batch path makes."""
    if not isinstance(obj, dict):
        return RawEvent()
    args = obj.get("args")
    kept = (
        RawArgs(**{attr: args[key] for key, attr in _ARG_FIELDS.items() if key in args})
        if isinstance(args, dict)
        else None
    )
    cat = obj.get("cat")
    return RawEvent(
        obj.get("ph"),
        cat if isinstance(cat, str) else None,  # a category that is no text is none the analysis knows
        obj.get("name"),
        obj.get("ts"),
        obj.get("dur"),
        obj.get("pid"),
        obj.get("tid"),
        kept,
    )


@dataclass(slots=True)
class Event:
    """The fields of one trace event the analysis needs (times in microseconds)."""

    name: str
    cat: str
    ph: str
    ts: float
    dur: float
    pid: int | str
    tid: int | str
    args: Mapping = field(default_factory=lambda: NO_ARGS)

    @property
    def end(self) -> float:
        return self.ts + self.dur


def _open_binary(raw) -> Any:
    """The file's bytes, decompressed when it is gzip; the raw file's position is the bytes read. The bytes are
    decoded as they are (msgspec reads UTF-8 itself: text first would convert every byte twice)."""
    magic = raw.read(2)
    raw.seek(0)
    return gzip.GzipFile(fileobj=raw) if magic == b"\x1f\x8b" else raw


def event_time(obj: RawEvent, key: str) -> float:
    """A finite number of microseconds; a trace event with "abc" or NaN there is refused, naming the event
    (a NaN start silently dropped its all-reduce from every step)."""
    value = getattr(obj, key) or 0.0
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or (key == "dur" and number < 0):
        raise TraceError(
            f"event {str(obj.name or '')[:60]!r}: '{key}' is {str(value)[:40]!r}, not a "
            + ("duration (negative)" if math.isfinite(number) else "time in microseconds")
        )
    return number


def correlation_of(obj: RawEvent) -> int:
    """The event's correlation id (a kernel's link to the runtime call that launched it), or NO_CORRELATION."""
    value = obj.args.correlation if obj.args is not None else None
    if value is None:
        return NO_CORRELATION
    try:
        return int(value)
    except (TypeError, ValueError):
        return NO_CORRELATION


_INF = float("inf")


def to_event(obj: RawEvent) -> Event:
    """Reduce one decoded trace event to an :class:`Event` (finite float times taken as they are; anything else
    checked by :func:`event_time`)."""
    ts, dur, name = obj.ts, obj.dur, obj.name
    if not (type(ts) is float and type(dur) is float and 0 <= dur < _INF and -_INF < ts < _INF):
        ts, dur = event_time(obj, "ts"), event_time(obj, "dur")
    return Event(
        name if type(name) is str else str(name if name is not None else ""),
        obj.cat or "",
        obj.ph or "",
        ts,
        dur,
        obj.pid if obj.pid is not None else 0,
        obj.tid if obj.tid is not None else 0,
        (obj.args.kept() if obj.args is not None else None) or NO_ARGS,
    )


def check_head(path: Path | str, size: int | None = None) -> None:
    """Decode the events of the first ``size`` bytes (about) of a trace: a bad byte there is the same one-line
    :class:`TraceError` a full read gives, found before any rank is read to its end."""
    size = size or HEAD_BYTES
    read = [0]

    def heard(n: int) -> None:
        read[0] = n

    for _ in iter_raw(path, heard, chunk=size):
        if read[0] > size:
            return


def check_tail(path: Path | str, size: int | None = None) -> None:
    """Decode the events of the last ``size`` bytes (about) of an uncompressed trace, from an event boundary to its
    end: a file cut short, or bad near its end, is the same one-line :class:`TraceError` a full read gives (the byte
    counted from the file's start), found before any rank is read in full. A compressed trace, or one without a
    line break between events near its end, is left to the full read (gzip cannot be entered in its middle)."""
    path = Path(path)
    try:
        with open(path, "rb") as raw:
            if raw.read(2) == b"\x1f\x8b":
                return
            length = raw.seek(0, 2)
            start = max(0, length - (size or TAIL_BYTES))
            raw.seek(start)
            tail = raw.read()
    except OSError:
        return  # the full read names what is wrong with the file
    boundaries = list(_LINE_BOUNDARY.finditer(tail))
    if not boundaries or (start == 0 and len(boundaries) < 2):
        return  # a small file: the head check reads it whole
    first = boundaries[0].start() + 2  # just past "},": the next event starts here
    chunks = iter([b"[" + tail[first:], b""])
    try:
        for _ in _decode_events(path, lambda: next(chunks, b"")):
            pass
    except TraceError as exc:
        shift = start + first - 1  # bytes of the file before the synthetic "[" stood for the boundary
        raise TraceError(_AT_BYTE.sub(lambda m: f"at byte {int(m.group(1)) + shift}", str(exc), count=1)) from None


def iter_raw(
    path: Path | str, on_bytes: Callable[[int], None] | None = None, chunk: int | None = None
) -> Iterator[RawEvent]:
    """Yield the decoded events of a trace, one by one (see :func:`iter_batches`)."""
    for batch in iter_batches(path, on_bytes, chunk):
        yield from batch


def iter_batches(
    path: Path | str, on_bytes: Callable[[int], None] | None = None, chunk: int | None = None
) -> Iterator[list[RawEvent]]:
    """Yield the decoded events of a trace a list at a time (a chunk's worth: a loop over them pays no generator
    per event); errors name the file and the uncompressed byte offset. ``on_bytes(n)`` hears how many bytes of
    the file (as stored, compressed or not) were read, chunk by chunk."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file")
    if path.stat().st_size == 0:
        raise TraceError(f"{path}: empty file, not a trace")
    try:
        with open(path, "rb") as raw:
            yield from _iter_objects(path, raw, on_bytes or (lambda n: None), chunk or CHUNK)
    except (EOFError, gzip.BadGzipFile, OSError) as exc:
        raise TraceError(f"{path}: cannot read ({exc}); truncated or corrupt compressed trace") from exc


def _iter_objects(path: Path, raw, on_bytes: Callable[[int], None], size: int) -> Iterator[list[RawEvent]]:
    binary = _open_binary(raw)
    expanded = 0

    def read() -> bytes:
        nonlocal expanded
        chunk = binary.read(size)
        stored = raw.tell()
        on_bytes(stored)
        expanded += len(chunk)
        if expanded > MAX_EXPANSION * stored + (16 << 20):
            raise TraceError(
                f"{path}: {stored:,} compressed bytes expand to more than {expanded:,}: "
                f"over {MAX_EXPANSION}x is no profiler trace (refused before it fills the memory or the hours)"
            )
        return chunk

    yield from _decode_events(path, read)


def _decode_events(path: Path, read: Callable[[], bytes]) -> Iterator[list[RawEvent]]:
    """The elements of ``traceEvents`` from bytes handed over a chunk at a time by ``read``: the whole events of
    a chunk are decoded in one call into :class:`RawEvent` records (msgspec, in C, straight from the bytes,
    keeping only the fields the analysis reads); where that fails, one event at a time into a dict with the
    exact byte of an error."""
    buf = read()
    consumed = 0  # bytes dropped from the front of buf so far
    start = len(buf) - len(buf.lstrip(_WS))
    if start >= len(buf):
        raise TraceError(f"{path}: empty file, not a trace")
    if buf[start : start + 1] == b"[":
        pos = start + 1
    elif buf[start : start + 1] == b"{":
        match = _KEY.search(buf)
        while match is None:
            more = read()
            if not more:
                raise TraceError(f"{path}: JSON object without a 'traceEvents' list: not a profiler trace")
            buf += more
            match = _KEY.search(buf)
        pos = match.end()
    else:
        raise TraceError(f"{path}: not JSON (byte 0 starts with {buf[start : start + 20]!r})")
    eof = False
    bad_cut = -1  # where a batch failed to decode (absolute): events up to it are read one at a time
    while True:
        gap = _SEPARATORS.match(buf, pos)  # whitespace and commas between events, skipped in C (always matches)
        pos = gap.end() if gap else pos
        if pos >= len(buf):
            if eof:
                raise TraceError(f"{path}: truncated at byte {consumed + pos}: the trace ends inside 'traceEvents'")
            more = read()
            eof = not more
            buf, consumed, pos = buf[pos:] + more, consumed + pos, 0
            continue
        if buf[pos] == _CLOSE:
            return
        if consumed + pos > bad_cut and (cut := buf.rfind(b"},", pos)) > pos:
            try:  # every whole event up to the chunk's last "}," decoded at once, into typed records
                batch = _BATCH.decode(b"".join((b"[", memoryview(buf)[pos : cut + 1], b"]")))  # one copy, not two
            except msgspec.DecodeError:  # a "}," inside a string, or a bad byte: one event at a time from here
                bad_cut = consumed + cut
            else:
                yield batch
                pos = cut + 2
                continue
        try:
            obj, length = _decode_one(buf, pos)
        except RecursionError:
            raise TraceError(f"{path}: an event at byte {consumed + pos} nests too deep: not a trace event") from None
        except _EventError as exc:
            if not eof and len(buf) - pos <= MAX_EVENT_CHARS:  # the event may go on in the next chunk
                more = read()
                eof = not more
                buf, consumed, pos = buf[pos:] + more, consumed + pos, 0
                continue
            where = consumed + pos + exc.offset
            if not buf[pos + exc.offset :].strip() or (eof and exc.msg.startswith("Unterminated string")):
                raise TraceError(f"{path}: truncated at byte {where}: the trace ends inside an event") from None
            raise TraceError(f"{path}: invalid JSON at byte {where}: {exc.msg}") from None
        pos += length
        if isinstance(obj, dict):
            yield [_record(obj)]


class _EventError(Exception):
    """One event that does not decode: the message and the byte (from the event's start) where it went wrong."""

    def __init__(self, msg: str, offset: int) -> None:
        super().__init__(msg)
        self.msg, self.offset = msg, offset


def _decode_one(buf: bytes, pos: int) -> tuple[Any, int]:
    """The JSON value starting at ``buf[pos]`` and its length in bytes (the slow path: events the batch decoder
    refused). Text is decoded from a window that grows while the value runs past it; a byte that is not UTF-8
    becomes U+FFFD in the value and still counts as one byte."""
    window = _FIRST_WINDOW
    while True:
        text = buf[pos : pos + window].decode("utf-8", "surrogateescape")
        try:
            obj, end = _DECODER.raw_decode(text)
        except json.JSONDecodeError as exc:
            if pos + window < len(buf):  # maybe only cut by the window: widen it
                window *= 16
                continue
            raise _EventError(exc.msg, len(text[: exc.pos].encode("utf-8", "surrogateescape"))) from None
        if text[:end].isascii():
            return obj, end
        length = len(text[:end].encode("utf-8", "surrogateescape"))
        return json.loads(buf[pos : pos + length].decode("utf-8", "replace")), length
