"""#27 item 8: two processes publishing at once kept 58 of 80 entries of ``book/editions.json``; the registry is
read and written under a lock, so every publisher's entry stays."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PUBLISHER = """
import sys
from pathlib import Path
from verifylab.publish.registry import publish
root, name = Path(sys.argv[1]), sys.argv[2]
for i in range(20):
    publish(root, {"id": f"{name}-{i}", "built": "2026-12-01 00:00 UTC", "commit": "c", "data_digest": "d",
                   "runs": [], "key_findings": []})
"""


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_four_publishers_at_once_keep_every_entry(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", PUBLISHER, str(tmp_path), name]) for name in "abcd"]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    ids = [e["id"] for e in json.loads((tmp_path / "book" / "editions.json").read_text())]
    assert sorted(ids) == sorted(f"{name}-{i}" for name in "abcd" for i in range(20))
