"""The long options an SGLang server accepts, read from a published wheel's sources without importing it: every
``--flag`` string of a ``parser.add_argument(...)`` call under ``sglang/srt/``, and, where a version builds its
parser from dataclass fields (0.5.2x: ``sglang/srt/arg_groups/fields``), each field annotated ``A[type, help]`` or
``A[type, Arg(...)]`` as ``--field-name`` (or its ``cli_name``) with its ``aliases``, unless marked ``no_cli``.
The launch command a page prints is checked against these (tests/test_launch_command.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pandas as pd

from verifylab.errors import GateError
from verifylab.gates.matrix import download_wheel
from verifylab.gates.wheel import open_wheel, parse_python

PARSER_SOURCES = re.compile(r"^sglang/srt/(server_args\.py|arg_groups/.*\.py)$")
FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")
WHEEL_VERSION = re.compile(r"^sglang-(\d+\.\d+\.\d+(?:\.post\d+)?)-")


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _field_flags(field: ast.AnnAssign) -> set[str]:
    """A dataclass field's CLI names: ``A[T, "help"]`` -> ``--field-name``; ``A[T, Arg(...)]`` -> its ``cli_name``
    (default ``--field-name``) and ``aliases``; none where ``no_cli=True`` or the annotation is not ``A[...]``."""
    annotation = field.annotation
    if not (isinstance(field.target, ast.Name) and isinstance(annotation, ast.Subscript)):
        return set()
    if not (isinstance(annotation.value, ast.Name) and annotation.value.id in ("A", "Annotated")):
        return set()
    parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else []
    if len(parts) < 2:
        return set()
    meta = parts[1]
    name = "--" + field.target.id.replace("_", "-")
    if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
        return {name}
    if not (isinstance(meta, ast.Call) and isinstance(meta.func, ast.Name) and meta.func.id == "Arg"):
        return set()
    no_cli = _keyword(meta, "no_cli")
    if isinstance(no_cli, ast.Constant) and no_cli.value is True:
        return set()
    cli = _keyword(meta, "cli_name")
    flags = {cli.value} if isinstance(cli, ast.Constant) and isinstance(cli.value, str) else {name}
    aliases = _keyword(meta, "aliases")
    if aliases is not None:
        flags |= {s for s in _strings(aliases) if FLAG.fullmatch(s)}
    return flags


def flags_in_source(text: str, where: str) -> set[str]:
    """The long options one source file of SGLang's parser registers."""
    tree = parse_python(text, where)
    flags: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            flags |= {s for arg in node.args for s in _strings(arg) if FLAG.fullmatch(s)}
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign):
                    flags |= _field_flags(item)
    return flags


def wheel_version(wheel: Path) -> str:
    found = WHEEL_VERSION.match(wheel.name)
    if found is None:
        raise GateError(f"{wheel.name}: not an SGLang wheel (sglang-<version>-...whl)")
    return found.group(1)


def flags_in_wheel(wheel: Path) -> set[str]:
    """Every long option the server of ``wheel`` accepts (module docstring); refused when none is found."""
    with open_wheel(wheel) as archive:  # limits on members and bytes; a bad wheel is one line
        sources = [(n, archive.read_text(n)) for n in archive.names() if PARSER_SOURCES.match(n)]
    flags = (
        set().union(*(flags_in_source(text, f"{wheel.name}:{name}") for name, text in sources)) if sources else set()
    )
    if "--model-path" not in flags:
        raise GateError(f"{wheel.name}: no server options found (sglang/srt/server_args.py has no --model-path)")
    return flags


def flags_table(versions: list[str], cache: Path) -> pd.DataFrame:
    """One row per (SGLang version, long option its server accepts), each wheel fetched into ``cache`` once."""
    rows = [
        {"sglang": version, "flag": flag}
        for version in versions
        for flag in sorted(flags_in_wheel(download_wheel("sglang", version, cache)))
    ]
    return pd.DataFrame(rows, columns=["sglang", "flag"])
