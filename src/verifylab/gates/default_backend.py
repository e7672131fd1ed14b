"""The attention backend SGLang chooses when none is given, read from a version's default-backend function (or, before
it was one, the block of ``_handle_attention_backend_compatibility`` that runs when none is given) by evaluating its
branches for an MLA and a dense model on SM90, SM100 and SM120: an EAGLE-3 chain (topk 1) with FlashInfer installed.
A predicate the evaluator does not know stops the audit with its source named."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from verifylab.errors import GateError
from verifylab.gates.verify_gate import Read, VerifyGate, functions_in, name_of, parse

GPUS = ("SM90", "SM100", "SM120")
SHAPES = ("MLA", "dense")
DEFAULT_FUNCTIONS = ("_get_default_attn_backend", "get_default_attn_backend")
SERVER_ARGS = "sglang/srt/server_args.py"


class _Unknown(GateError):
    pass


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
    name = name_of(node)
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
    return isinstance(stmt, ast.Assign) and any(name_of(t) == "attention_backend" for t in stmt.targets)


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


def default_backend_gates(read: Read, names: Iterable[str], version: str) -> list[VerifyGate]:
    """The default attention backend per model shape and GPU family, from the version's default-backend function
    (or, before it was one, the block of ``_handle_attention_backend_compatibility`` that runs when none is given)."""
    candidates = [n for n in names if n.startswith("sglang/srt/") and n.endswith(".py")]
    for rel in [SERVER_ARGS, *sorted(c for c in candidates if "arg_groups" in c)]:
        text = read(rel)
        if text is None or not any(f in text for f in (*DEFAULT_FUNCTIONS, "attention_backend is None")):
            continue
        tree = parse(text, rel)
        for fn in functions_in(tree):
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
                        and name_of(s.test.left) == "attention_backend"
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
