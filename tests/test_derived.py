"""What is derived from the evidence is computed by typed functions keyed by their explicit inputs
(``verifylab.derived``): no string-keyed memo anywhere, and two callers with different inputs never share a value."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from verifylab.derived import derived
from verifylab.model.case.cycle import cycle_account
from verifylab.model.case.options import model_inputs
from verifylab.model.case.speculation import inputs
from verifylab.model.inputs.stored import stored_inputs
from verifylab.store.evidence import Evidence

SRC = Path(__file__).resolve().parents[1] / "src" / "verifylab"
REPO = SRC.parents[1]


@pytest.fixture(scope="module")
def ev() -> Evidence:
    return Evidence(REPO / "data")


def test_no_value_is_kept_under_a_string_key():
    """No call of a ``derived(key, compute)`` memo, and no attribute that looks like one, in the package."""
    calls = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "derived":
                calls.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert calls == []
    assert not hasattr(Evidence, "derived")


def test_inputs_are_keyed_by_the_account_they_are_given(ev):
    """The bug the string memo had: inputs built from another account were served from the first caller's."""
    own = inputs(stored_inputs(ev))
    assert inputs(stored_inputs(ev)) is own  # built once per evidence
    other_account = replace(cycle_account(stored_inputs(ev)), verify_ms=cycle_account(stored_inputs(ev)).verify_ms * 2)
    other = model_inputs(stored_inputs(ev), other_account)
    assert other is not own and other.account == other_account
    assert inputs(stored_inputs(ev)).account == cycle_account(stored_inputs(ev))


def test_each_evidence_has_its_own_values(ev):
    assert cycle_account(stored_inputs(Evidence(REPO / "data"))) is not cycle_account(stored_inputs(ev))
    assert cycle_account(stored_inputs(ev)) is cycle_account(stored_inputs(ev))


def test_an_input_that_cannot_be_a_key_is_refused_by_name(ev):
    @derived
    def rows_of(sources: Evidence, where: dict) -> int:
        return len(where)

    with pytest.raises(TypeError, match=r"rows_of: .*\(dict\) are not hashable"):
        rows_of(ev, {"a": 1})
