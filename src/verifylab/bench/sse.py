"""Server-Sent Events as SGLang and OpenAI-style servers stream them: the data of each complete event, split from
the bytes as they arrive."""

from __future__ import annotations


def sse_events(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Split a Server-Sent-Events byte stream into the data of its complete events and the unfinished rest.

    As the SSE format defines it: lines end in CRLF, LF or CR; an event ends at a blank line; ``data:`` lines of
    one event are joined with a newline (one optional space after the colon is dropped); comment lines (``:``)
    and other fields (``event:``, ``id:``, ``retry:``) carry no data. An event without data yields nothing."""
    text = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    *complete, rest = text.split(b"\n\n")
    events = []
    for block in complete:
        data = []
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
        if data:
            events.append(b"\n".join(data))
    return events, rest


class SSEParser:
    """Server-Sent Events fed as bytes arrive: each ``feed`` scans only the new bytes for an event's end, so a
    long event costs its length once, not once per read (re-splitting the whole buffer was quadratic)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for an event's end
        self._cr = False  # the last byte fed was a CR: a LF that follows belongs to it

    def feed(self, data: bytes) -> list[bytes]:
        """The data of every event completed by ``data`` (see :func:`sse_events` for the format)."""
        if self._cr and data.startswith(b"\n"):
            data = data[1:]
        self._cr = data.endswith(b"\r")
        self._buffer += data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = self._buffer.find(b"\n\n", max(self._scanned - 1, 0))
        if end < 0:
            self._scanned = len(self._buffer)
            return []
        last = self._buffer.rfind(b"\n\n") + 2
        events, _ = sse_events(bytes(self._buffer[:last]))
        del self._buffer[:last]
        self._scanned = len(self._buffer)
        return events
