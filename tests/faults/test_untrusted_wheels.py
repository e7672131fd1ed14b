"""Issue 70, untrusted wheels: ``gates matrix`` reads a wheel it did not build within limits (members, bytes per
member, bytes in all, nesting) and a bad one ends in one line naming the wheel, with nothing written. At 7ac0507 a
1.5 MB wheel took 3.2 GB and 51 s, and a non-zip, a corrupt wheel, a deeply nested source or a wheel with no gate
findings ended in a traceback. The boundary: ``gates.wheel`` (``open_wheel``, ``parse_python``)."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

VERSION = "9.9.1"
GATE = "def f():\n    if is_sm90_supported() or is_sm100_supported():\n        enable_allreduce_fusion = True\n"
META = f"Metadata-Version: 2.1\nName: sglang\nVersion: {VERSION}\nRequires-Dist: flashinfer_python==0.6.4\n"
BASE = {
    "sglang/__init__.py": "",
    "sglang/version.py": f"__version__ = '{VERSION}'\n",
    f"sglang-{VERSION}.dist-info/METADATA": META,
}


def _zip(path: Path, members: dict[str, str | bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _bomb(path: Path) -> None:  # one member far past any source: 17 MiB of blanks deflate to a few KiB
    _zip(path, {**BASE, "sglang/srt/fusion.py": GATE + " " * (17 << 20)})


def _many_members_in_all(path: Path) -> None:  # each member small, together past the total (lowered in the test)
    _zip(path, {**BASE, **{f"sglang/srt/m{i}.py": GATE + "#" * (1 << 20) for i in range(12)}})


def _html_page(path: Path) -> None:  # a proxy's error page saved as the wheel
    path.write_text("<html><body>502 Bad Gateway</body></html>")


def _truncated(path: Path) -> None:  # a download cut half-way
    _zip(path, {**BASE, "sglang/srt/fusion.py": GATE * 50})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _unary_chain(path: Path) -> None:  # parses into a tree deeper than the parser's stack
    _zip(path, {**BASE, "sglang/srt/fusion.py": GATE + "x = " + "-" * 200_000 + "1\n"})


def _attribute_chain(path: Path) -> None:
    _zip(path, {**BASE, "sglang/srt/fusion.py": GATE + "x = " + "a." * 200_000 + "b\n"})


def _no_findings(path: Path) -> None:
    _zip(path, BASE)


def _path_out_of_the_folder(path: Path) -> None:  # a member that would be written outside the unpack folder
    _zip(path, {**BASE, "sglang/../../escaped.py": GATE})


CASES = {
    # the cases
    "zip bomb": (_bomb, "more than any source"),
    "not a zip": (_html_page, "not a readable wheel"),
    "nested source": (_unary_chain, "nested deeper"),
    "no gate findings": (_no_findings, "no gate, table or limit found"),
    # held out: a second kind of each
    "bytes in all": (_many_members_in_all, "unpacked in all"),
    "truncated download": (_truncated, "not a readable wheel"),
    "attribute chain": (_attribute_chain, "nested deeper"),
    "path out of the folder": (_path_out_of_the_folder, "not a plain relative path"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_wheel_is_one_line_naming_it_and_nothing_is_written(tmp_path, monkeypatch, case):
    make, words = CASES[case]
    if importlib.util.find_spec("verifylab.gates.wheel"):  # the total, lowered to keep this quick (absent before)
        monkeypatch.setattr("verifylab.gates.wheel.MAX_READ_BYTES", 8 << 20)
    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    wheel = cache / "wheels" / f"sglang-{VERSION}-py3-none-any.whl"
    make(wheel)
    out = tmp_path / "gates" / "gate_matrix.csv"
    args = ["gates", "matrix", "--versions", VERSION, "--flashinfer-versions", "", "--pairs", ""]
    result = CliRunner().invoke(app, [*args, "--cache", str(cache), "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception  # no traceback
    assert words in result.output and wheel.name in result.output, result.output
    assert len(result.output.strip().splitlines()) <= 3, result.output  # one line (a long one wraps)
    assert not out.parent.exists()  # nothing written
    assert not (tmp_path / "escaped.py").exists() and not (cache / "escaped.py").exists()


def test_a_wheel_within_the_limits_is_audited(tmp_path):
    from verifylab.gates.matrix import gate_matrix

    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    _zip(cache / "wheels" / f"sglang-{VERSION}-py3-none-any.whl", {**BASE, "sglang/srt/fusion.py": GATE})
    frame = gate_matrix({"sglang": [VERSION]}, cache)
    assert list(frame["file"].unique()) == ["sglang/srt/fusion.py"]


def test_a_wheel_without_a_flashinfer_pin_never_asks_pip_for_none(tmp_path, monkeypatch):
    """#77: an SGLang wheel whose METADATA pins no FlashInfer is left out of the forensics, never downloaded as
    ``flashinfer-python==None``."""
    import pandas as pd

    from verifylab.gates import forensics

    asked: list[tuple[str, str]] = []

    def refuse(package: str, version: str, cache: Path) -> Path:
        asked.append((package, version))
        raise AssertionError(f"asked pip for {package}=={version}")

    monkeypatch.setattr(forensics, "download_wheel", refuse)
    pins = pd.DataFrame({"sglang": ["0.5.99", "0.5.98"], "flashinfer_pin": [None, "None"]})
    frame = forensics.fusion_forensics(pd.DataFrame(columns=["package", "version", "kind", "status"]), pins, tmp_path)
    assert asked == [] and frame.empty
    assert [forensics.version_or_none(v) for v in ("0.7.1", "0.6.11.post1", "None", float("nan"))] == [
        "0.7.1", "0.6.11.post1", None, None,
    ]  # fmt: skip


def test_a_table_path_that_is_a_folder_is_refused_before_any_wheel_is_read(tmp_path):
    """`gates matrix --out DIR` downloaded and audited every wheel, then died writing: refused first, in one line."""
    args = ["gates", "matrix", "--versions", VERSION, "--flashinfer-versions", "", "--pairs", ""]
    result = CliRunner().invoke(app, [*args, "--cache", str(tmp_path / "cache"), "--out", str(tmp_path)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.exception
    assert f"--out {tmp_path}: not a file" in " ".join(result.output.split())
    assert not (tmp_path / "cache").exists()  # nothing fetched
