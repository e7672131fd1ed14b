"""The environment variables an SGLang wheel reads, read from its sources without importing it: every name declared
in its ``environ.py`` registry (``NAME = EnvBool(...)`` and the like) and every literal name a source passes to
``os.environ.get`` / ``os.getenv`` / ``os.environ[...]`` or to SGLang's ``get_*_env_var`` helpers. A launch command's
``SGLANG_*`` variables are checked against this table (``verifylab.launch.build_command``), with the wheel's hash."""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

import pandas as pd

from verifylab.errors import GateError
from verifylab.gates.matrix import download_wheel
from verifylab.gates.sglang_flags import wheel_version
from verifylab.gates.wheel import open_wheel, parse_python

SOURCES = re.compile(r"^sglang/.*\.py$")
NAME = re.compile(r"^(SGLANG|SGL|FLASHINFER|NCCL|TORCH|CUDA|NVSHMEM)_[A-Z0-9_]+$")  # the families a launch sets
READERS = {"get", "getenv", "get_bool_env_var", "get_int_env_var", "get_float_env_var", "get_str_env_var"}
MAX_SOURCES = 20_000  # SGLang's wheels hold ~3,000 Python files


def env_in_source(text: str, where: str) -> set[str]:
    """The variable names one source file reads or declares (module docstring)."""
    tree = parse_python(text, where)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
            first = node.args[0] if node.args else None
            if called in READERS and isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "environ":
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                names.add(key.value)
        elif isinstance(node, ast.ClassDef) and where.endswith("environ.py"):
            for item in node.body:
                if (
                    isinstance(item, (ast.Assign, ast.AnnAssign))
                    and isinstance(value := item.value, ast.Call)
                    and isinstance(value.func, ast.Name)
                    and value.func.id.startswith("Env")
                ):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return {n for n in names if NAME.match(n)}


def env_in_wheel(wheel: Path) -> set[str]:
    """Every variable the SGLang of ``wheel`` reads; refused when the wheel cannot be read or reads none."""
    with open_wheel(wheel) as archive:  # limits on members and bytes; a bad wheel is one line
        entries = [n for n in archive.names() if SOURCES.match(n)]
        if len(entries) > MAX_SOURCES:
            raise GateError(f"{wheel.name}: {len(entries):,} Python files, more than an SGLang wheel holds")
        names: set[str] = set()
        for entry in entries:
            names |= env_in_source(archive.read_text(entry), f"{wheel.name}:{entry}")
    if not any(n.startswith("SGLANG_") for n in names):
        raise GateError(f"{wheel.name}: no SGLANG_ variable found: not an SGLang wheel")
    return names


def env_table(versions: list[str], cache: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per (SGLang version, variable its wheel reads), and one per wheel read (its file name and sha256)."""
    rows, wheels = [], []
    for version in versions:
        wheel = download_wheel("sglang", version, cache)
        if wheel_version(wheel) != version:
            raise GateError(f"{wheel.name}: not SGLang {version}")
        wheels.append(
            {"sglang": version, "wheel": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
        )
        rows += [{"sglang": version, "variable": name} for name in sorted(env_in_wheel(wheel))]
    return pd.DataFrame(rows, columns=["sglang", "variable"]), pd.DataFrame(
        wheels, columns=["sglang", "wheel", "sha256"]
    )
