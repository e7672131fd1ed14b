"""#78: repeated blocks in ``src/`` measured by a checker in the test lock (pylint's ``symilar``, the engine of its
``duplicate-code`` check: six lines or more, comments and docstrings left out, imports and signatures kept) against
a committed baseline that can only shrink. At the start of #78 (6d078c1) it listed 2 blocks, 20 lines, both between
``store/public_context.py`` and ``store/public_speculation.py`` (their column list and their loader's imports: one
loader, ``store/public.load_rate_table``, now reads both); the baseline is empty."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIN_LINES = 6
BASELINE: set[str] = set()  # "file:[a:b] ~ file:[c:d]" per block left, with its reason; only ever shrinks
BLOCK = re.compile(r"^(\d+) similar lines in \d+ files\n((?:==.+\n)+)", re.MULTILINE)


def repeated_blocks(root: Path) -> set[str]:
    """Every block of ``MIN_LINES`` or more lines that two places under ``root`` share, as ``a ~ b`` (paths
    relative to ``root``, line ranges as symilar prints them)."""
    files = sorted(str(p) for p in root.rglob("*.py"))
    if not files:
        return set()
    run = subprocess.run(
        [sys.executable, "-m", "pylint.checkers.symilar", "-d", str(MIN_LINES), "-i", "--ignore-docstrings", *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "TOTAL lines=" in run.stdout, run.stderr[-2000:]
    blocks = set()
    for match in BLOCK.finditer(run.stdout):
        places = [line[2:].replace(str(root) + "/", "") for line in match.group(2).splitlines()]
        blocks.add(" ~ ".join(sorted(places)))
    return blocks


def test_no_block_repeats_beyond_the_baseline():
    blocks = repeated_blocks(ROOT / "src" / "verifylab")
    assert blocks - BASELINE == set(), "a new repeated block: make it one piece, or say in BASELINE why it stays"
    assert BASELINE - blocks == set(), "gone: remove these from BASELINE"


def test_a_planted_copy_is_found(tmp_path):
    body = "".join(f"    total = total * {i} + len(name) - {i * 7}\n" for i in range(MIN_LINES + 1))
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(f"def f_{name[0]}(name):\n    total = 0\n{body}    return total\n")
    (blocks,) = repeated_blocks(tmp_path)
    assert blocks.startswith("a.py:[") and " ~ b.py:[" in blocks
