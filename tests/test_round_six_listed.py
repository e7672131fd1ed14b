"""Every test ``tests/before_change/round_six_cases.py`` names for a case of #77 exists (a renamed or removed test
would leave its case unchecked without a word)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cases() -> list[tuple[str, list[str]]]:
    spec = importlib.util.spec_from_file_location("round_six_cases", ROOT / "tests/before_change/round_six_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


def test_every_case_names_tests_that_exist():
    missing = []
    for case, nodes in _cases():
        assert nodes, case
        for node in nodes:
            file, name = node.split("::")
            tree = ast.parse((ROOT / file).read_text())
            defined = {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
            if name not in defined:
                missing.append(node)
    assert not missing
