"""#77, outside files: a published wheel is read within its budget whatever it holds. Wheels made of generated members
(plain and hostile names, sizes about the limits, any bytes, Python nested past the parser) are read member by
member and their Python parsed: each either reads or ends in one ``GateError`` naming the wheel (never another
exception), an unsafe name is refused before any byte is read, and no audit unpacks more than its budget."""

from __future__ import annotations

import contextlib
import signal
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


# what the patterns over a wheel's text look for, each left open (its closing never comes), and line breaks: text
# made of these repeated is what made a pattern backtrack over the rest of the member at every occurrence
OPENERS = [
    "supported_major_versions = [1, ",
    "def determine_mla_backend(x, ",
    'def ordered_sm12x_backends(): """',
    "def gen_trtllm_comm_module(",
    "class TRTLLMAllReduceFusionWorkspace ",
    "use_symm_dev_mem ",
    "enable_multicast ",
    "__CUDA_ARCH__ ",
    "SGLANG_ENABLE_SPLITKV_VERIFY = f(",
    "symm",
    "allreduce_",
    "is_sm90 and fusion ",
    "if major >= ",
    "\n",
    " \n",
    "\t",
    "#",
]
# what must stand before the repeated openers for a reader to look at them: the definition it reads inside
HEADS = {
    "flashinfer/jit/comm.py": "def gen_trtllm_comm_module():\n",
    "flashinfer/comm/trtllm_ar.py": "def trtllm_create_ipc_workspace_for_all_reduce_fusion(\n"
    "  use_symm_dev_mem: bool = True):\n  SymmDeviceMemory\n",
    "flashinfer/comm/allreduce.py": "class TRTLLMAllReduceFusionWorkspace:\n  use_symm_dev_mem = True\n",
}
FLASHINFER_MEMBERS = [*HEADS, "flashinfer/data/include/flashinfer/comm/trtllm_allreduce_fusion.cuh",
                      "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"]  # fmt: skip
SERVER_ARGS = "sglang/srt/server_args.py"
HOSTILE_TEXT_BYTES = 1 << 20  # a quadratic scan of a mebibyte takes minutes; a linear one, milliseconds
TEXT_BUDGET_S = 5.0


def _sglang_members() -> list[str]:
    from verifylab.gates import verify_path

    return [SERVER_ARGS, verify_path.ENVIRON, verify_path.TRITON, verify_path.SPLITKV, verify_path.REGISTRY,
            verify_path.MLA_CHOICE, verify_path.MLA_POLICY, verify_path.MLA_JIT, verify_path.JIT_CORE]  # fmt: skip


@contextlib.contextmanager
def _cpu_budget(seconds: float):
    """Raise in this thread once ``seconds`` of CPU are spent (the regex engine checks for signals as it runs)."""

    def over(signum, frame):
        raise TimeoutError(f"past {seconds:.0f} CPU-s")

    previous = signal.signal(signal.SIGPROF, over)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _read_with_one_hostile_member(member: str, body: str, tmp: Path) -> None:
    """Every reader of a wheel's text, with ``member`` holding ``body`` (after the definition its reader looks
    inside) and every other file empty or absent: FlashInfer's facts, the verify path's gates, the flags and
    environment tables, the gate scan's prefilter and scan."""
    from verifylab.gates import forensics, prefilter, sglang_env, sglang_flags, verify_path
    from verifylab.gates.scan import _scan_source

    text = HEADS.get(member, "") + body
    wheel = tmp / "flashinfer_python-0.6.15-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in FLASHINFER_MEMBERS:
            archive.writestr(name, text if name == member else "")
    forensics.flashinfer_facts(wheel, "0.6.15")

    def read(rel: str) -> str | None:
        return text if rel == member else None

    names = _sglang_members()
    for call in (  # each part of the verify path's gates on its own: a part that refuses ends only itself
        lambda: verify_path.default_backend_gates(read, names, "0.5.17"),
        lambda: verify_path.splitkv_gates(read, "0.5.17"),
        lambda: verify_path.flashinfer_mla_gates(read, "0.5.17", "0.6.15", read),
        lambda: verify_path.flag_gates(read, names, "0.5.17", {"--x"}),
        lambda: sglang_flags.flags_in_source(text, "w.whl:server_args.py"),
        lambda: sglang_env.env_in_source(text, "w.whl:environ.py"),
        lambda: _scan_source(text, "w.whl:fusion.py", 120) if prefilter.worth_parsing(text) else None,
    ):
        with contextlib.suppress(GateError):  # not Python: refused in one line, as any reader of a wheel does
            call()


def _repeated(pieces: list[str], tail: str = "") -> str:
    unit = "".join(pieces)
    return unit * (HOSTILE_TEXT_BYTES // len(unit)) + tail


@pytest.mark.parametrize("member", [*FLASHINFER_MEMBERS, *_sglang_members()])
def test_a_member_of_any_opener_repeated_is_read_in_time_linear_in_its_length(tmp_path, member):
    """#77: the 1.1 KB wheel that was a quadratic bomb, by class: a member made of what a pattern looks for, left
    open and repeated, is read by every reader within a CPU budget a linear scan meets a thousand times over."""
    for opener in OPENERS:
        with _cpu_budget(TEXT_BUDGET_S):
            _read_with_one_hostile_member(member, _repeated([opener]), tmp_path)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    member=st.sampled_from([*FLASHINFER_MEMBERS, SERVER_ARGS]),
    pieces=st.lists(st.sampled_from(OPENERS), min_size=2, max_size=4),
    tail=st.sampled_from(["", "x", " )", "]"]),
)
def test_openers_mixed_are_read_in_time_linear_in_their_length(tmp_path, member, pieces, tail):
    with _cpu_budget(TEXT_BUDGET_S):
        _read_with_one_hostile_member(member, _repeated(pieces, tail), tmp_path)
