"""Build small Chrome-format traces for analyzer tests (test helper, not measured data)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def event(name: str, cat: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def write_trace(path: Path, events: list[dict], gz: bool = False) -> Path:
    doc = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": events, "traceName": str(path)}
    data = json.dumps(doc, indent=1).encode()
    if gz:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path
