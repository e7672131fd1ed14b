"""The gates of the verify path, read from an SGLang tree or wheel (and the FlashInfer it pins) by parsing, never
importing: which attention backend SGLang chooses by default for an MLA and a dense model per GPU family (its
default-backend function evaluated branch by branch for SM90, SM100 and SM120), every condition on Triton's split-KV
verify kernel (the architecture gate, the variable and its default, topk, the MLA refusal in ``can_handle``), the
grouped-head shared-KV verify (0.5.22+), the serial extend kernel the verify falls back to, whether the code admits
``--attention-backend flashinfer`` for an MLA model on SM120, and which verify-related options the server has.
Each row carries file and line; a predicate the evaluator does not know stops the audit with its source named."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from verifylab.errors import GateError
from verifylab.gates.inventory import package_version
from verifylab.gates.matrix import download_wheel, pinned_flashinfer
from verifylab.gates.sglang_flags import PARSER_SOURCES, flags_in_source, flags_in_wheel
from verifylab.gates.wheel import WheelReader, open_wheel, parse_python

GPUS = ("SM90", "SM100", "SM120")
SHAPES = ("MLA", "dense")
Read = Callable[[str], str | None]  # a tree's file by its path under the tree (sglang/..., flashinfer/...)

DEFAULT_FUNCTIONS = ("_get_default_attn_backend", "get_default_attn_backend")
TRITON = "sglang/srt/layers/attention/triton_backend.py"
SPLITKV = "sglang/kernels/ops/attention/verify_splitkv.py"
ENVIRON = "sglang/srt/environ.py"
REGISTRY = "sglang/srt/layers/attention/attention_registry.py"
SERVER_ARGS = "sglang/srt/server_args.py"
MLA_CHOICE = "flashinfer/utils.py"
MLA_POLICY = "flashinfer/mla/_batch_mla/_auto_policy.py"  # 0.7.2+: the auto backend's order per architecture
MLA_JIT = "flashinfer/jit/attention/modules.py"
JIT_CORE = "flashinfer/jit/core.py"
ARCH_NAMES = re.compile(r"is_sm\d+|is_hopper|is_blackwell|capability|is_gfx")

# What each verify-related option changes (a description of SGLang's behaviour, the same in every version that has it).
VERIFY_FLAGS = {
    "--attention-backend": "the backend of every pass, the verify's included (default: the table above)",
    "--prefill-attention-backend": "the backend of prefill (extend) passes; the verify is one where "
    "--speculative-attention-mode is prefill (its default)",
    "--decode-attention-backend": "the backend of decode passes; the verify uses it where "
    "--speculative-attention-mode is decode",
    "--speculative-draft-attention-backend": "the draft model's backend only: not the target's verify",
    "--speculative-attention-mode": "which of the prefill and decode backends runs the target's verify (prefill "
    "by default); it chooses no kernel of its own",
    "--triton-attention-num-kv-splits": "Triton's decode kernel: how many parts one stream's KV is split into; the "
    "serial extend kernel that verifies does not split",
    "--triton-attention-split-tile-size": "Triton's decode kernel: the tile size of a split (deterministic mode); "
    "not the verify's extend kernel",
}


@dataclass(frozen=True)
class VerifyGate:
    """One thing on the verify path: what it is, for which model shape and GPU, where, the condition, the value."""

    package: str
    version: str
    item: str
    shape: str
    gpu: str
    file: str
    line: int
    function: str
    condition: str
    value: str
    status: str  # closed (keeps the fast path off on SM120), open, info
    note: str = ""


class _Unknown(GateError):
    pass


def _name(node: ast.AST) -> str:
    """The last name of a call, attribute or name (``get_platform().is_sm100`` -> ``is_sm100``)."""
    if isinstance(node, ast.Call):
        return _name(node.func)
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _truths(shape: str, gpu: str) -> dict[str, bool]:
    """What each predicate of a default-backend function is for an EAGLE-3 chain (topk 1) on an NVIDIA GPU of
    ``gpu`` with FlashInfer installed, for a model of ``shape``."""
    return {
        "use_mla_backend": shape == "MLA",
        "is_hopper_with_cuda_12_3": gpu == "SM90",
        "is_sm90_supported": gpu == "SM90",
        "is_sm90": gpu == "SM90",
        "is_sm100_supported": gpu == "SM100",
        "is_sm100": gpu == "SM100",
        "is_sm120_supported": gpu == "SM120",
        "is_sm120": gpu == "SM120",
        **dict.fromkeys(("is_hip", "is_mps", "is_out_of_tree", "is_npu", "is_xpu", "is_cpu", "is_musa"), False),
        "is_no_spec_infer_or_topk_one": True,
        "is_flashinfer_available": True,
        "has_flashinfer": True,
        "has_attention_sinks": False,
        "has_asymmetric_kv": False,
        "speculative_algorithm": True,  # set: an EAGLE-3 server
        "speculative_eagle_topk": True,  # set: 1
        "_forces_eagle_topk_one": False,  # DFLASH only (0.5.23): not EAGLE-3
    }


def _truth(node: ast.expr, truths: dict[str, bool], source: str) -> bool:
    if isinstance(node, ast.BoolOp):
        values = [_truth(v, truths, source) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _truth(node.operand, truths, source)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, op, right = node.left, node.ops[0], node.comparators[0]
        if isinstance(right, ast.Constant) and right.value is None and isinstance(op, ast.Is | ast.IsNot):
            is_set = _truth(left, truths, source)
            return not is_set if isinstance(op, ast.Is) else is_set
        if isinstance(op, ast.In) and isinstance(left, ast.Constant) and isinstance(left.value, str):
            return False  # a named architecture (Whisper) in the model's list: not the models this audit asks about
    name = _name(node)
    if name in truths and isinstance(node, ast.Call | ast.Attribute | ast.Name):
        return truths[name]
    raise _Unknown(f"cannot evaluate {ast.get_source_segment(source, node) or ast.dump(node)[:80]}")


def _backend(node: ast.expr, truths: dict[str, bool], source: str) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.IfExp):
        branch = node.body if _truth(node.test, truths, source) else node.orelse
        return _backend(branch, truths, source)
    raise _Unknown(f"cannot evaluate {ast.get_source_segment(source, node) or ast.dump(node)[:80]}")


def _sets_backend(stmt: ast.stmt) -> bool:
    """A ``return <backend>``, or an assignment to ``attention_backend`` (0.5.9's inline block)."""
    if isinstance(stmt, ast.Return):
        return stmt.value is not None
    return isinstance(stmt, ast.Assign) and any(_name(t) == "attention_backend" for t in stmt.targets)


def _choose(body: list[ast.stmt], truths: dict[str, bool], source: str, taken: list[str]) -> tuple[str, int] | None:
    """Walk a default-backend body: the backend it returns (or assigns to ``attention_backend``) and the line."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            holds = _truth(stmt.test, truths, source)
            taken.append(f"{' '.join((ast.get_source_segment(source, stmt.test) or '').split())} = {holds}")
            found = _choose(stmt.body if holds else stmt.orelse, truths, source, taken)
            if found is not None:
                return found
        elif _sets_backend(stmt):
            assert isinstance(stmt, ast.Return | ast.Assign) and stmt.value is not None
            return _backend(stmt.value, truths, source), stmt.lineno
    return None


def _functions(tree: ast.AST) -> Iterable[ast.FunctionDef]:
    return (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))


def _parse(text: str, where: str) -> ast.AST:
    return parse_python(text, where)


def default_backend_gates(read: Read, names: Iterable[str], version: str) -> list[VerifyGate]:
    """The default attention backend per model shape and GPU family, from the version's default-backend function
    (or, before it was one, the block of ``_handle_attention_backend_compatibility`` that runs when none is given)."""
    candidates = [n for n in names if n.startswith("sglang/srt/") and n.endswith(".py")]
    for rel in [SERVER_ARGS, *sorted(c for c in candidates if "arg_groups" in c)]:
        text = read(rel)
        if text is None or not any(f in text for f in (*DEFAULT_FUNCTIONS, "attention_backend is None")):
            continue
        tree = _parse(text, rel)
        for fn in _functions(tree):
            body: list[ast.stmt] | None = None
            if fn.name in DEFAULT_FUNCTIONS:
                body = fn.body
            elif fn.name == "_handle_attention_backend_compatibility":
                body = next(
                    (
                        s.body
                        for s in ast.walk(fn)
                        if isinstance(s, ast.If)
                        and isinstance(s.test, ast.Compare)
                        and _name(s.test.left) == "attention_backend"
                        and isinstance(s.test.ops[0], ast.Is)
                    ),
                    None,
                )
            if body is None:
                continue
            rows = []
            for shape in SHAPES:
                for gpu in GPUS:
                    taken: list[str] = []
                    try:
                        found = _choose(body, _truths(shape, gpu), text, taken)
                    except _Unknown as exc:
                        raise GateError(f"sglang {version} {rel}:{fn.name}: {exc}") from None
                    if found is None:
                        raise GateError(f"sglang {version} {rel}:{fn.name}: no backend chosen for {shape} on {gpu}")
                    backend, line = found
                    rows.append(
                        VerifyGate(
                            "sglang",
                            version,
                            "default attention backend",
                            shape,
                            gpu,
                            rel,
                            line,
                            fn.name,
                            "; ".join(taken),
                            backend,
                            "closed" if shape == "MLA" and gpu == "SM120" and backend == "triton" else "info",
                            "EAGLE-3 chain (topk 1), FlashInfer installed, no --attention-backend given",
                        )
                    )
            return rows
    raise GateError(f"sglang {version}: no default attention backend function found ({', '.join(DEFAULT_FUNCTIONS)})")


def _assignment(tree: ast.AST, attr: str) -> ast.Assign | None:
    return next(
        (n for n in ast.walk(tree) if isinstance(n, ast.Assign) and any(_name(t) == attr for t in n.targets)), None
    )


def _env_default(read: Read, variable: str) -> str:
    text = read(ENVIRON) or ""
    found = re.search(rf"^\s*{variable}\s*=\s*(\w+)\(([^)]*)\)", text, re.M)
    return f"{found.group(1)}({found.group(2)})" if found else "not declared"


def splitkv_gates(read: Read, version: str) -> list[VerifyGate]:
    """Every condition on Triton's split-KV verify kernel, the MLA refusal of its ``can_handle``, the grouped-head
    shared-KV verify (0.5.22+) and the serial extend kernel the verify falls back to."""
    text = read(TRITON)
    if text is None:
        return []
    tree = _parse(text, TRITON)
    rows: list[VerifyGate] = []
    switch = _assignment(tree, "use_verify_splitkv")
    if switch is None:
        return [
            VerifyGate("sglang", version, "split-KV verify", "", "", TRITON, 1, "", "no use_verify_splitkv", "absent",
                       "info", "this version has no split-KV verify kernel: the verify runs extend_attention_fwd")
        ]  # fmt: skip
    operands = switch.value.values if isinstance(switch.value, ast.BoolOp) else [switch.value]
    for operand in operands:
        source = ast.get_source_segment(text, operand) or ""
        if "gfx95" in source:
            status, value, note = "closed", "False on every NVIDIA GPU", "AMD MI350 (gfx950) only"
        elif "SGLANG_ENABLE_SPLITKV_VERIFY" in source:
            status, value = "open", _env_default(read, "SGLANG_ENABLE_SPLITKV_VERIFY")
            note = "the variable's default (environ.py): on unless set to 0"
        elif "topk" in source:
            status, value, note = "open", "holds for a chain", "EAGLE-3 with --speculative-eagle-topk 1"
        else:
            status, value, note = "info", "", ""
        rows.append(
            VerifyGate("sglang", version, "split-KV verify switch", "", "SM120", TRITON, operand.lineno,
                       "TritonAttnBackend.__init__", source, value, status, note)
        )  # fmt: skip
    rows += _can_handle(read, version)
    shared = next((f for f in _functions(tree) if f.name == "_should_use_verify_shared_kv"), None)
    if shared is not None:
        first = shared.body[0]
        condition = ast.get_source_segment(text, first.test) if isinstance(first, ast.If) else ""
        mla = next((ast.get_source_segment(text, s.body[0]) for s in ast.walk(shared) if isinstance(s, ast.If)
                    and _name(s.test) == "use_mla"), "")  # fmt: skip
        rows.append(
            VerifyGate("sglang", version, "grouped-head shared-KV verify", "MLA", "SM120", TRITON, shared.lineno,
                       shared.name, f"{condition}; MLA: {mla}", "False on every NVIDIA GPU", "closed",
                       "the grouped-head split-KV verify for absorbed MLA (verify_mla.py): gfx95 and Kimi-K3 only")
        )  # fmt: skip
    call = _extend_call(tree)
    if call is not None:
        rows.append(
            VerifyGate("sglang", version, "verify kernel (Triton)", "", "SM120", TRITON, call.lineno,
                       "TritonAttnBackend.forward_extend", "no split-KV path serves the verify",
                       "extend_attention_fwd (serial over each stream's prefix)", "info",
                       "one program per (stream, head, query block) walks the whole prefix: time grows with one "
                       "stream's context"
                       + ("" if _name(call.func) == "extend_attention_fwd" else f" (through {_name(call.func)})"))
        )  # fmt: skip
    return rows


def _extend_call(tree: ast.AST) -> ast.Call | None:
    """The call in ``forward_extend`` that runs ``extend_attention_fwd``: directly, or through a method of the class
    that calls it (0.5.22+: ``_forward_extend_kernel``)."""
    functions = {f.name: f for f in _functions(tree)}
    reaches = {"extend_attention_fwd"} | {
        name
        for name, fn in functions.items()
        if any(isinstance(c, ast.Call) and _name(c.func) == "extend_attention_fwd" for c in ast.walk(fn))
        and name != "forward_extend"
    }
    forward = functions.get("forward_extend")
    if forward is None:
        return None
    return next(
        (c for c in ast.walk(forward) if isinstance(c, ast.Call) and _name(c.func) in reaches),
        None,
    )


def _can_handle(read: Read, version: str) -> list[VerifyGate]:
    text = read(SPLITKV)
    if text is None:
        return []
    tree = _parse(text, SPLITKV)
    fn = next((f for f in _functions(tree) if f.name == "can_handle"), None)
    if fn is None:
        return []
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            source = ast.get_source_segment(text, node.test) or ""
            if "q_extend.shape[2]" in source and "v_extend.shape[2]" in source:
                return [
                    VerifyGate("sglang", version, "split-KV verify refuses MLA", "MLA", "", SPLITKV, node.lineno,
                               "can_handle", source, "refused (head_dim != v_head_dim)", "closed",
                               "its comment: the kernel GPU-faults on the MLA shape; the verify falls back to "
                               "extend_attention_fwd")
                ]  # fmt: skip
    return [
        VerifyGate("sglang", version, "split-KV verify refuses MLA", "MLA", "", SPLITKV, fn.lineno, "can_handle",
                   "no head-dim check", "admitted by can_handle", "open",
                   "MLA shapes reach the kernel where the switch holds; its output on MLA is not checked here")
    ]  # fmt: skip


def flashinfer_mla_gates(read: Read, version: str, flashinfer: str, fi_read: Read | None) -> list[VerifyGate]:
    """Whether the code admits ``--attention-backend flashinfer`` for an MLA model on SM120: SGLang's backend
    factory (any architecture check on its MLA branch) and the pinned FlashInfer's MLA backend choice and JIT."""
    rows: list[VerifyGate] = []
    text = read(REGISTRY)
    if text is not None:
        tree = _parse(text, REGISTRY)
        fn = next((f for f in _functions(tree) if f.name == "create_flashinfer_backend"), None)
        if fn is not None:
            checks = sorted({_name(n) for n in ast.walk(fn) if ARCH_NAMES.fullmatch(_name(n) or "-")})
            rows.append(
                VerifyGate("sglang", version, "flashinfer MLA backend admitted", "MLA", "SM120", REGISTRY, fn.lineno,
                           fn.name, "runner.use_mla_backend -> FlashInferMLAAttnBackend",
                           "admitted by the code; not run on SM120" if not checks else f"checked: {', '.join(checks)}",
                           "open" if not checks else "closed", "no architecture check on the MLA branch")
            )  # fmt: skip
    if fi_read is None:
        return rows
    choice, policy = fi_read(MLA_CHOICE) or "", fi_read(MLA_POLICY) or ""
    found = re.search(r"def determine_mla_backend\([^)]*\)[^:]*:\s*\n\s*return ([^\n]+)", choice)
    ordered = re.search(r'def ordered_sm12x_backends\([^)]*\)[^:]*:(?:\s*""".*?""")?\s*return ([^\n]+)', policy, re.S)
    if found:
        rows.append(
            VerifyGate("flashinfer", flashinfer, "flashinfer MLA kernel on SM120", "MLA", "SM120", MLA_CHOICE,
                       choice[: found.start()].count("\n") + 1, "determine_mla_backend", found.group(1).strip(),
                       "fa2 (fa3 needs sm90a)", "open", f"pinned by sglang {version}")
        )  # fmt: skip
    elif ordered:
        rows.append(
            VerifyGate("flashinfer", flashinfer, "flashinfer MLA kernel on SM120", "MLA", "SM120", MLA_POLICY,
                       policy[: ordered.start()].count("\n") + 1, "ordered_sm12x_backends", ordered.group(1).strip(),
                       "fa2 first (the auto policy's order on SM120/SM121)", "open", f"pinned by sglang {version}")
        )  # fmt: skip
    jit = fi_read(MLA_JIT) or ""
    core = fi_read(JIT_CORE) or ""
    at = jit.find("def gen_batch_mla_module")
    arch = re.search(r"if major >= (\d+)", core)
    if at >= 0:
        fa3_only = 'if backend == "fa3":\n        extra_cuda_cflags += sm90a_nvcc_flags' in jit[at:]
        rows.append(
            VerifyGate("flashinfer", flashinfer, "flashinfer MLA JIT arch", "MLA", "SM120", MLA_JIT,
                       jit[:at].count("\n") + 1, "gen_batch_mla_module",
                       "fa2: no arch flags (the GPU's own); fa3: sm90a_nvcc_flags" if fa3_only else "see source",
                       f"built for the GPU's arch (check_cuda_arch: major >= {arch.group(1) if arch else '?'})",
                       "open", f"pinned by sglang {version}")
        )  # fmt: skip
    return rows


def flag_gates(read: Read, names: Iterable[str], version: str, flags: set[str]) -> list[VerifyGate]:
    """Which verify-related options the server has, where each is declared, and what it changes for the verify."""
    sources = [n for n in names if re.match(r"^sglang/srt/(server_args\.py|arg_groups/.*\.py)$", n)]
    rows = []
    for flag in VERIFY_FLAGS:
        where, line = "", 0
        field = flag[2:].replace("-", "_")
        for rel in sources:
            text = read(rel) or ""
            hit = re.search(rf'"{re.escape(flag)}"|^\s+{field}\s*:', text, re.M)
            if hit:
                where, line = rel, text[: hit.start()].count("\n") + 1
                break
        present = flag in flags
        rows.append(
            VerifyGate("sglang", version, "verify option", "", "", where, line, "", flag,
                       "exists" if present else "absent", "info", VERIFY_FLAGS[flag] if present else "")
        )  # fmt: skip
    return rows


def verify_path_gates(
    read: Read, names: list[str], version: str, flags: set[str], flashinfer: str = "", fi_read: Read | None = None
) -> list[VerifyGate]:
    """Every verify-path row of one SGLang version (and the FlashInfer it pins, where given)."""
    return [
        *default_backend_gates(read, names, version),
        *splitkv_gates(read, version),
        *flashinfer_mla_gates(read, version, flashinfer, fi_read),
        *flag_gates(read, names, version, flags),
    ]


def tree_reader(root: Path) -> tuple[Read, list[str]]:
    """A reader of an installed tree (``root`` holds ``sglang/``, maybe ``flashinfer/``) and its Python files."""

    def read(rel: str) -> str | None:
        path = root / rel
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() and not path.is_symlink() else None

    package = root / "sglang"
    names = [p.relative_to(root).as_posix() for p in package.rglob("*.py")] if package.is_dir() else []
    return read, names


def verify_path_frame(rows: Iterable[VerifyGate]) -> pd.DataFrame:
    """The rows as a table (one column per field)."""
    columns = list(VerifyGate.__dataclass_fields__)
    return pd.DataFrame([asdict(r) for r in rows], columns=columns)


def _wheel_reader(archive: WheelReader) -> Read:
    known = set(archive.names())

    def read(rel: str) -> str | None:
        return archive.read_text(rel) if rel in known else None

    return read


def verify_path_table(versions: list[str], cache: Path) -> pd.DataFrame:
    """Every verify-path row of each SGLang version's published wheel and the FlashInfer wheel it pins (fetched into
    ``cache`` once)."""

    rows: list[VerifyGate] = []
    for version in versions:
        wheel = download_wheel("sglang", version, cache)
        flags = flags_in_wheel(wheel)
        with open_wheel(wheel) as archive:
            names = [n for n in archive.names() if n.startswith("sglang/") and n.endswith(".py")]
            pin = pinned_flashinfer(archive)
            read = _wheel_reader(archive)
            if pin is None:
                rows += verify_path_gates(read, names, version, flags)
                continue
            with open_wheel(download_wheel("flashinfer", pin, cache)) as fi_archive:
                rows += verify_path_gates(read, names, version, flags, pin, _wheel_reader(fi_archive))
    return verify_path_frame(rows)


def tree_verify_path(root: Path) -> pd.DataFrame:
    """The verify-path rows of an installed tree (``root`` holds ``sglang/`` and maybe ``flashinfer/``); the flags
    are read from its parser sources as from a wheel's."""

    read, names = tree_reader(root)
    flags: set[str] = set()
    for name in names:
        if PARSER_SOURCES.match(name):
            flags |= flags_in_source(read(name) or "", name)
    version = package_version(root, "sglang") or "installed"
    fi_version = package_version(root, "flashinfer") or ""
    fi_read = tree_reader(root)[0] if (root / "flashinfer").is_dir() else None
    return verify_path_frame(verify_path_gates(read, names, version, flags, fi_version, fi_read))


def verify_path_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows as the CLI and chapter 1 show them: one line per version and item, with file:line."""
    if frame.empty:
        return frame
    short = frame["file"].str.replace(r"^(sglang/srt/|sglang/|flashinfer/)", "", regex=True)
    shown = frame.assign(
        where=short + ":" + frame["line"].astype(str),
        what=[
            item + (f" ({', '.join(p for p in (shape, gpu) if p)})" if shape or gpu else "")
            for item, shape, gpu in zip(frame["item"], frame["shape"], frame["gpu"], strict=True)
        ],
    )
    return shown[["package", "version", "what", "value", "status", "where", "condition"]]
