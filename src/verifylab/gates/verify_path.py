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
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from verifylab.gates.default_backend import default_backend_gates
from verifylab.gates.inventory import package_version
from verifylab.gates.matrix import download_wheel, pinned_flashinfer
from verifylab.gates.sglang_flags import PARSER_SOURCES, flags_in_source, flags_in_wheel
from verifylab.gates.verify_gate import Read, VerifyGate, functions_in, name_of, parse
from verifylab.gates.wheel import WheelReader, open_wheel

TRITON = "sglang/srt/layers/attention/triton_backend.py"
SPLITKV = "sglang/kernels/ops/attention/verify_splitkv.py"
ENVIRON = "sglang/srt/environ.py"
REGISTRY = "sglang/srt/layers/attention/attention_registry.py"
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


def _assignment(tree: ast.AST, attr: str) -> ast.Assign | None:
    return next(
        (n for n in ast.walk(tree) if isinstance(n, ast.Assign) and any(name_of(t) == attr for t in n.targets)), None
    )


def _env_default(read: Read, variable: str) -> str:
    text = read(ENVIRON) or ""
    found = re.search(rf"^[ \t]*{variable}[ \t]*=[ \t]*(\w+)\(([^)\n]*)\)", text, re.M)  # one line: linear
    return f"{found.group(1)}({found.group(2)})" if found else "not declared"


def splitkv_gates(read: Read, version: str) -> list[VerifyGate]:
    """Every condition on Triton's split-KV verify kernel, the MLA refusal of its ``can_handle``, the grouped-head
    shared-KV verify (0.5.22+) and the serial extend kernel the verify falls back to."""
    text = read(TRITON)
    if text is None:
        return []
    tree = parse(text, TRITON)
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
    shared = next((f for f in functions_in(tree) if f.name == "_should_use_verify_shared_kv"), None)
    if shared is not None:
        first = shared.body[0]
        condition = ast.get_source_segment(text, first.test) if isinstance(first, ast.If) else ""
        mla = next((ast.get_source_segment(text, s.body[0]) for s in ast.walk(shared) if isinstance(s, ast.If)
                    and name_of(s.test) == "use_mla"), "")  # fmt: skip
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
                       + ("" if name_of(call.func) == "extend_attention_fwd" else f" (through {name_of(call.func)})"))
        )  # fmt: skip
    return rows


def _extend_call(tree: ast.AST) -> ast.Call | None:
    """The call in ``forward_extend`` that runs ``extend_attention_fwd``: directly, or through a method of the class
    that calls it (0.5.22+: ``_forward_extend_kernel``)."""
    functions = {f.name: f for f in functions_in(tree)}
    reaches = {"extend_attention_fwd"} | {
        name
        for name, fn in functions.items()
        if any(isinstance(c, ast.Call) and name_of(c.func) == "extend_attention_fwd" for c in ast.walk(fn))
        and name != "forward_extend"
    }
    forward = functions.get("forward_extend")
    if forward is None:
        return None
    return next(
        (c for c in ast.walk(forward) if isinstance(c, ast.Call) and name_of(c.func) in reaches),
        None,
    )


def _can_handle(read: Read, version: str) -> list[VerifyGate]:
    text = read(SPLITKV)
    if text is None:
        return []
    tree = parse(text, SPLITKV)
    fn = next((f for f in functions_in(tree) if f.name == "can_handle"), None)
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


DEFINITION_CHARS = 20_000  # how far past ``def name(`` a pattern reads: its signature, docstring and first line


def _definition(text: str, pattern: str) -> re.Match[str] | None:
    """``pattern`` (starting ``def name(``) matched at the first definition of that name, read at most
    ``DEFINITION_CHARS`` on: one start and a bounded window, so a name repeated for megabytes costs linear time."""
    at = text.find(pattern[: pattern.index("\\(")] + "(")
    return re.compile(pattern, re.S).match(text, at, at + DEFINITION_CHARS) if at >= 0 else None


def flashinfer_mla_gates(read: Read, version: str, flashinfer: str, fi_read: Read | None) -> list[VerifyGate]:
    """Whether the code admits ``--attention-backend flashinfer`` for an MLA model on SM120: SGLang's backend
    factory (any architecture check on its MLA branch) and the pinned FlashInfer's MLA backend choice and JIT."""
    rows: list[VerifyGate] = []
    text = read(REGISTRY)
    if text is not None:
        tree = parse(text, REGISTRY)
        fn = next((f for f in functions_in(tree) if f.name == "create_flashinfer_backend"), None)
        if fn is not None:
            checks = sorted({name_of(n) for n in ast.walk(fn) if ARCH_NAMES.fullmatch(name_of(n) or "-")})
            rows.append(
                VerifyGate("sglang", version, "flashinfer MLA backend admitted", "MLA", "SM120", REGISTRY, fn.lineno,
                           fn.name, "runner.use_mla_backend -> FlashInferMLAAttnBackend",
                           "admitted by the code; not run on SM120" if not checks else f"checked: {', '.join(checks)}",
                           "open" if not checks else "closed", "no architecture check on the MLA branch")
            )  # fmt: skip
    if fi_read is None:
        return rows
    choice, policy = fi_read(MLA_CHOICE) or "", fi_read(MLA_POLICY) or ""
    found = _definition(choice, r"def determine_mla_backend\([^)]*\)[^:]*:\s*\n\s*return ([^\n]+)")
    ordered = _definition(policy, r'def ordered_sm12x_backends\([^)]*\)[^:]*:(?:\s*""".*?""")?\s*return ([^\n]+)')
    chosen = None
    if found:
        chosen = (MLA_CHOICE, choice, found, "determine_mla_backend", "fa2 (fa3 needs sm90a)")
    elif ordered:
        order = "fa2 first (the auto policy's order on SM120/SM121)"
        chosen = (MLA_POLICY, policy, ordered, "ordered_sm12x_backends", order)
    if chosen is not None:
        file, text, match, function, value = chosen
        rows.append(
            VerifyGate("flashinfer", flashinfer, "flashinfer MLA kernel on SM120", "MLA", "SM120", file,
                       text[: match.start()].count("\n") + 1, function, match.group(1).strip(), value, "open",
                       f"pinned by sglang {version}")
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
            hit = re.search(rf'"{re.escape(flag)}"|^[ \t]+{field}[ \t]*:', text, re.M)  # one line: linear
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
