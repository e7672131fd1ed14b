"""#77, outside files: a published wheel is read within its budget whatever it holds. Wheels made of generated members
(plain and hostile names, sizes about the limits, any bytes, Python nested past the parser) are read member by
member and their Python parsed: each either reads or ends in one ``GateError`` naming the wheel (never another
exception), an unsafe name is refused before any byte is read, and no audit unpacks more than its budget."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verifylab.errors import GateError
from verifylab.gates import wheel

PLAIN = st.from_regex(r"[a-z][a-z0-9_]{0,8}(/[a-z][a-z0-9_]{0,8}){0,2}\.(py|txt|cuh)", fullmatch=True)
HOSTILE = st.sampled_from(["/etc/passwd", "../up.py", "a/../../b.py", "a\\b.py", "\\root.py", "./../x.py"])
PYTHON = st.one_of(
    st.text(max_size=300),
    st.integers(1, 400).map(lambda n: "x = " + "(" * n + "1" + ")" * n + "\n"),  # nested past the parser at depth
    st.just("def f(:\n"),
    st.just("a = 1\x00\n"),
)
MEMBER = st.tuples(st.one_of(PLAIN, PLAIN, HOSTILE), st.one_of(PYTHON.map(str.encode), st.binary(max_size=6000)))


def _audit(path: Path) -> dict[str, object]:
    """What an audit does with a wheel: every member read as text, its Python parsed."""
    out: dict[str, object] = {}
    with wheel.open_wheel(path) as reader:
        for name in reader.names():
            text = reader.read_text(name)
            out[name] = wheel.parse_python(text, f"{path.name}:{name}") if name.endswith(".py") else text
        assert reader._read <= wheel.MAX_READ_BYTES  # the budget held on every wheel that read whole
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(members=st.lists(MEMBER, min_size=1, max_size=8, unique_by=lambda m: m[0]))
def test_a_generated_wheel_reads_or_is_refused_in_one_line_within_its_budget(tmp_path, monkeypatch, members):
    monkeypatch.setattr(wheel, "MAX_MEMBER_BYTES", 4096)  # small budgets, so generated members cross them
    monkeypatch.setattr(wheel, "MAX_READ_BYTES", 12_000)
    path = tmp_path / "hostile-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    unsafe = [name for name, _ in members if not wheel._plain_member(name)]
    too_big = any(len(data) > 4096 for _, data in members)
    try:
        read = _audit(path)
    except GateError as exc:
        assert str(exc).startswith(path.name) and "\n" not in str(exc)
        if unsafe:
            assert "is not a plain relative path" in str(exc)
        return
    assert not unsafe and not too_big, "an unsafe or oversized member was read"
    assert set(read) == {name for name, _ in members}


@pytest.mark.parametrize("depth", [10, 200, 5000])
def test_python_nested_past_the_parser_is_one_line(depth):
    source = "x = " + "[" * depth + "]" * depth + "\n"
    try:
        wheel.parse_python(source, "w.whl:deep.py")
    except GateError as exc:
        assert str(exc).startswith("w.whl:deep.py: ")
