import re
from pathlib import Path

import pytest

from verifylab.book import execute_chapter
from verifylab.errors import ParameterError
from verifylab.params import validate_parameters


def test_invalid_mode_names_parameter_and_allowed_values(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    with pytest.raises(ParameterError) as info:
        validate_parameters(mode="livee", where="02_benchmarks")
    message = str(info.value)
    assert "\n" not in message
    assert "02_benchmarks: parameter 'mode' = 'livee'" in message
    assert "'replay' or 'live'" in message


def test_missing_data_dir_is_named(tmp_path):
    with pytest.raises(ParameterError, match=r"parameter 'data_dir'.*does not exist"):
        validate_parameters(data_dir=tmp_path / "nope")


def test_invalid_notebook_parameter_fails_the_chapter_with_one_line(repo_root, tmp_path):
    source = repo_root / "notebooks" / "00_introduction.py"
    out = tmp_path / "00_introduction.ipynb"
    result = execute_chapter(source, out, {"mode": "bogus", "data_dir": "data"}, cwd=repo_root)
    assert not result.ok
    assert result.error.startswith("ParameterError: 00_introduction: parameter 'mode' = 'bogus'")
    assert not out.exists()  # nothing half-written where the book reads


def test_book_has_every_chapter_and_no_network_reference(built_book: Path):
    html_files = list(built_book.rglob("*.html"))
    names = {p.stem for p in html_files}
    for chapter in [
        "00_introduction",
        "01_environment_and_gates",
        "02_benchmarks",
        "03_verify_breakdown",
        "04_fusion_vs_elimination",
        "05_recommendations",
        "methods",
    ]:
        assert chapter in names
    remote = re.compile(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", re.I)
    for page in html_files:
        text = page.read_text(encoding="utf-8")
        for match in remote.finditer(text):
            tag_start = text.rfind("<", 0, match.start())
            tag = text[tag_start : match.end()]
            # plain hyperlinks (<a href>) are fine; scripts, stylesheets, images and fonts are not
            assert tag.startswith("<a "), f"{page.name} loads from the network: {tag[:120]}"
    intro = (built_book / "book" / "_generated" / "00_introduction.html").read_text(encoding="utf-8")
    assert 'class="verifylab-chart"' in intro
    assert "<svg" in intro
