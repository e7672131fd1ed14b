"""#82: no module of the package is over 400 lines: one responsibility each, a file a reader holds in their head. A
module that grows past it is split by what its parts are (as chapter 04's account, the run tables' declarations,
the client's event stream, the stand-in's fake traces and the trace's kernel table were)."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "verifylab"
MOST_LINES = 400


def long_files(src: Path = SRC) -> dict[str, int]:
    """Every module of ``src`` over :data:`MOST_LINES` lines, with its length."""
    lengths = {
        p.relative_to(src).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in src.rglob("*.py")
    }
    return {name: n for name, n in lengths.items() if n > MOST_LINES}


def test_no_module_is_over_400_lines():
    assert long_files() == {}


def test_a_module_grown_past_400_lines_is_named(tmp_path):
    (tmp_path / "short.py").write_text("x = 1\n" * MOST_LINES)
    (tmp_path / "long.py").write_text("x = 1\n" * (MOST_LINES + 1))
    assert long_files(tmp_path) == {"long.py": MOST_LINES + 1}
