"""``tests/before_change/compare_books.py`` (#78's "rebuilt identical" check) sees a changed sentence on a page and a
changed cell in an export, and counts as the same what differs only in the edition's id, the build time or a
number's last digits."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _compare_books():
    spec = importlib.util.spec_from_file_location("compare_books", ROOT / "tests/before_change/compare_books.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(root: Path, sentence: str, edition: str, cell: str) -> Path:
    (root / "exports").mkdir(parents=True)
    (root / "index.html").write_text(
        f"<html><head><script>var x = 1;</script></head><body><p>Edition {edition}, built 2026-12-06 14:00:00</p>"
        f"<p>{sentence}</p><table><tr><td>a</td><td>1</td></tr></table></body></html>"
    )
    (root / "exports" / "t.csv").write_text(f"name,value\nx,{cell}\ny,2\n")
    return root


def test_the_same_book_under_another_edition_and_time_is_the_same(tmp_path, capsys):
    compare_books = _compare_books()
    before = _build(tmp_path / "a", "EAGLE-3 off.", "0.1.0+90de5d3c.nogit", "0.1234567890123456")
    after = _build(tmp_path / "b", "EAGLE-3 off.", "0.1.0+0a1b2c3d", "0.1234567890123457")
    assert compare_books.compare(before, after) == 0
    assert "1 number(s) differ past their 12th significant digit" in capsys.readouterr().out


def test_a_changed_sentence_and_a_changed_cell_are_named(tmp_path, capsys):
    compare_books = _compare_books()
    before = _build(tmp_path / "a", "EAGLE-3 off.", "0.1.0+90de5d3c", "0.25")
    after = _build(tmp_path / "b", "EAGLE-3 on from 5 streams.", "0.1.0+90de5d3c", "0.5")
    assert compare_books.compare(before, after) == 2
    out = capsys.readouterr().out
    assert "-EAGLE-3 off." in out and "+EAGLE-3 on from 5 streams." in out
    assert "row 1, value: '0.25' -> '0.5'" in out
