"""#64: the decision page's speculation answer and `box --plan`'s travel a short way from the functions that read the
stored runs and the public tables to the sentence that writes them: the model's inputs are read once into one record
(``model/inputs/stored.py``) and the fits and the pricing take that record. Measured by ``benchmarks/answer_path.py``
(every call while the answer is computed, no derived value kept)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def answer_path():
    spec = importlib.util.spec_from_file_location("answer_path", ROOT / "benchmarks" / "answer_path.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _measured_path(answer_path, monkeypatch, answer: str) -> tuple[set[str], set]:
    """The files and the steps of ``answer``'s path, measured from the checkout's data with no cache."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("VERIFYLAB_CACHE", "off")
    compute, roots, writer = answer_path.ANSWERS[answer]()
    nodes, steps = answer_path.answer_path(answer_path.call_edges(compute), roots, writer)
    return {path for path, _ in nodes}, steps


def _reads_below_the_record(steps) -> list:
    """The steps from a fit, the pricing or the case study straight to a reader of the runs or the evidence (not
    through the record's accessors)."""
    return [
        (a, b) for a, b in steps
        if a[0].startswith(("model/fits/", "model/pricing/", "model/case/"))
        and b[0] in ("sources.py", "store/evidence.py")
    ]  # fmt: skip


def test_the_decision_pages_speculation_answer_passes_through_at_most_15_files_in_78_steps(answer_path, monkeypatch):
    """(60 steps until #78 made the record lazy: a fit now asks the record for a part on its first use, so every fit
    that reads a part is on the way to the record's one accessor, 18 steps more; none reads past the record. The
    walk of the evidence's values, below, is the measure that counts what the laziness saves.)"""
    files, steps = _measured_path(answer_path, monkeypatch, "decision-speculation")
    assert len(files) <= 15 and len(steps) <= 78, (len(files), len(steps), sorted(files))
    assert not any(path.startswith("model/pricing/") for path in files)
    assert _reads_below_the_record(steps) == []


def test_box_plans_answer_passes_through_at_most_15_files_in_40_steps(answer_path, monkeypatch):
    """The README's `box --plan` (Kimi-K2.5 INT4, TP 8, healthy P2P, 32k): the command parses, the plan's answer
    (``model/answers/plan_answer.py``) asks the record for the parts it needs, and the command prints. (64 steps until
    #78: the plan prices its regime's curve without the case study's account, which only the reported regime needs.)"""
    files, steps = _measured_path(answer_path, monkeypatch, "box-plan")
    assert len(files) <= 15 and len(steps) <= 40, (len(files), len(steps), sorted(files))
    assert not any(path.startswith(("model/pricing/", "model/case/")) for path in files)
    assert _reads_below_the_record(steps) == []


def test_a_fit_that_reads_the_store_is_on_the_path(answer_path):
    """The measure sees a planted reader: a function called below the root that reads a run is counted."""
    a, b, reader = ("x.py", "root"), ("model/fits/grid.py", "fit"), ("sources.py", "MeasuredRuns.read_table")
    nodes, steps = answer_path.answer_path({(a, b): 1, (b, reader): 1}, {a}, (a, ("w.py", "write")))
    assert b in nodes and (b, reader) in steps
    nodes, _ = answer_path.answer_path({(a, b): 1, (a, reader): 1}, {a}, (a, ("w.py", "write")))
    assert b not in nodes  # a fit given what was read is not on the way


# #78: the evidence's walk (``answer_path.py --walk``) as it stood before the model had one door, at 6d078c1: the
# functions the evidence's values pass through (stays) per answer. A change may only shorten it.
WALK_BEFORE = {"decision-speculation": 150, "box-plan": 129, "model-speculation": 110}


@pytest.mark.parametrize("answer", sorted(WALK_BEFORE))
def test_the_evidence_walks_no_further_than_before_the_door(answer_path, monkeypatch, answer):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("VERIFYLAB_CACHE", "off")
    compute, _, _ = answer_path.WALKS[answer]()
    stays, rooms = answer_path.evidence_walk(compute)
    assert len(stays) <= WALK_BEFORE[answer], (len(stays), len(rooms))


def test_the_walk_follows_a_readers_value_and_not_a_typed_one(answer_path):
    """A function given what a reader returned (or a record holding it) is a stay, and so is what it hands on; one
    given only numbers anyone could type is not."""
    namespace: dict = {}
    source = (
        "class MeasuredRuns:\n"
        "    def table(self):\n        return [1.0, 2.0]\n"
        "def total(rows):\n    return {'rows': rows}\n"
        "def halve(record):\n    return [record]\n"
        "def typed(x):\n    return x * 2\n"
        "def compute():\n    rows = MeasuredRuns().table()\n    halve(total(rows))\n    typed(3.0)\n"
    )
    exec(compile(source, answer_path.PACKAGE + "/sources.py", "exec"), namespace)  # a reader where readers live
    stays, rooms = answer_path.evidence_walk(namespace["compute"])
    assert {name for _, name in stays} == {"total", "halve"} and rooms == {"sources.py"}
