"""#64: the decision page's speculation answer and `box --plan`'s travel a short way from the functions that read the
stored runs and the public tables to the sentence that writes them: the model's inputs are read once into one record
(``model/inputs/stored.py``) and the fits and the pricing take that record. Measured by ``benchmarks/answer_path.py``
(every call while the answer is computed, no derived value kept)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("answer-path")  # one worker profiles each answer once for every test here


@pytest.fixture(scope="module")
def answer_path():
    spec = importlib.util.spec_from_file_location("answer_path", ROOT / "benchmarks" / "answer_path.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROFILED: dict[str, tuple] = {}  # answer -> (edges, stays): each answer profiled once per session, both measures


def _profiled(answer_path, monkeypatch, answer: str) -> tuple:
    """``answer`` computed once under the profiler from the checkout's data with no cache: its calls and its stays."""
    if answer not in PROFILED:
        monkeypatch.chdir(ROOT)
        monkeypatch.setenv("VERIFYLAB_CACHE", "off")
        compute, _, _ = answer_path.WALKS[answer]()
        PROFILED[answer] = answer_path.profile_answer(compute)
    return PROFILED[answer]


def _measured_path(answer_path, monkeypatch, answer: str) -> tuple[set[str], set]:
    """The files and the steps of ``answer``'s path, measured from the checkout's data with no cache."""
    _, roots, writer = answer_path.ANSWERS[answer]()
    edges, _ = _profiled(answer_path, monkeypatch, answer)
    nodes, steps = answer_path.answer_path(edges, roots, writer)
    return {path for path, _ in nodes}, steps


def _reads_below_the_record(steps) -> list:
    """The steps from a fit, the pricing or the case study straight to a reader of the runs or the evidence (not
    through the record's accessors)."""
    return [
        (a, b) for a, b in steps
        if a[0].startswith(("model/fits/", "model/pricing/", "model/case/"))
        and b[0] in ("sources.py", "store/evidence.py")
    ]  # fmt: skip


@pytest.mark.parametrize("answer", ["decision-speculation", "box-plan"])
def test_an_answer_reaches_the_stored_runs_only_through_the_record(answer_path, monkeypatch, answer):
    """The decision page's speculation answer and the README's `box --plan` (Kimi-K2.5 INT4, TP 8, healthy P2P, 32k):
    no fit, pricing or case-study function calls a reader of the runs or the evidence; each asks the record. (Until
    #78 this test also bounded the files and steps down to the readers: 15 files, 60 and 64 steps. Since the record
    reads each part on its first use, a fit or a price that asks for a part is on that path, so the bound measured
    how lazily the record reads rather than how far the values travel; the walk of the evidence's values below is the
    measure.)"""
    _, steps = _measured_path(answer_path, monkeypatch, answer)
    assert steps and _reads_below_the_record(steps) == []


def test_a_fit_that_reads_the_store_is_on_the_path(answer_path):
    """The measure sees a planted reader: a function called below the root that reads a run is counted."""
    a, b, reader = ("x.py", "root"), ("model/fits/grid.py", "fit"), ("sources.py", "MeasuredRuns.read_table")
    nodes, steps = answer_path.answer_path({(a, b): 1, (b, reader): 1}, {a}, (a, ("w.py", "write")))
    assert b in nodes and (b, reader) in steps
    nodes, _ = answer_path.answer_path({(a, b): 1, (a, reader): 1}, {a}, (a, ("w.py", "write")))
    assert b not in nodes  # a fit given what was read is not on the way


# #78: the evidence's walk (``answer_path.py --walk``): the functions the evidence's values pass through (stays) per
# answer, before the model had one door (6d078c1) and the ceiling after it. ``model speculation`` answered by a public
# matrix no longer builds the case study's model (0.33x; #78 asks 0.65x); ``box --plan`` prices its regime without the
# case study's account; the decision page's answer still walks through the whole model per regime (its own answer)
# and gained the on-between rule's two properties (a band that loses at one stream and pays under load). Since the
# walk leaves an enum's member and an empty tuple untainted (one object wherever typed), ``box --plan`` is 109: 4 of
# its 113 were the launch command's functions, given the empty tuple a record's part had returned (the before values
# are the same under that rule, measured again at b19bf01: 150, 129, 110). The case study's ``inputs`` takes the record
# itself (it called ``inputs_of``): the decision page's 150. ``box --plan`` 112 since it prices the all-reduce it
# launches (SGLang's PCIe-IPC where it runs and a curve prices it; it priced NCCL and launched PCIe-IPC before): the
# PCIe-IPC curve, its price and the link rate past the curve's sizes are 3 more stays. 121 since it launches PCIe-IPC
# only where the model's best configuration has more goodput on it than on NCCL at the owner's load (at 32 streams
# Kimi-K2.5's verify on PCIe-IPC is no faster): the public matrix's rates do not see the all-reduce, so the choice
# prices both on the model (its rates, speculation's gains, the calibration carried over from NCCL: 9 stays). 122
# since the servers `--verify` starts carry their roles and all-reduces (where the two tie, the other's best is one).
# 124 since a box is priced on the nearest grid's overheads (a grid of the box itself where one is stored, else the
# first, shared one): the box now passes through the rule (`box_overheads`) and the search for its own grid.
# 142 since it prices FlashInfer's fused all-reduce + RMSNorm as a third all-reduce (launched where it is ahead of
# NCCL, as `box --probe` answers fusion on): the fused curve at the regime (2), the fused kernel's factor inside a
# pass, fitted on the stored traces (4 of the fit, 6 of the traces' readers), the norm kernel it replaces and the
# curves it is read with (3), whether the SGLang named has the switch (1), the regime's alternatives (1). Then 140,
# 148 and 34: an engine's verify reads only the measured rate of the kernel it chose (not the other's too).
WALK_BEFORE = {"decision-speculation": 150, "box-plan": 129, "model-speculation": 110}
WALK_AFTER = {"decision-speculation": 148, "box-plan": 140, "model-speculation": 34}


@pytest.mark.parametrize("answer", sorted(WALK_AFTER))
def test_the_evidence_walks_no_further_than_after_the_door(answer_path, monkeypatch, answer):
    _, stays = _profiled(answer_path, monkeypatch, answer)
    assert len(stays) <= WALK_AFTER[answer], len(stays)
    if answer == "model-speculation":
        assert len(stays) <= 0.65 * WALK_BEFORE[answer]


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


def test_a_member_or_an_empty_tuple_a_reader_returned_taints_no_one_given_it_elsewhere(answer_path):
    """An enum's member and the empty tuple are one object wherever they are typed: a function given ``Kind.ON`` or
    ``()`` by code that never read the evidence is not a stay because a reader happened to return the same one."""
    namespace: dict = {}
    source = (
        "import enum\n"
        "class Kind(enum.Enum):\n    ON = 1\n"
        "class MeasuredRuns:\n"
        "    def kind(self):\n        return Kind.ON\n"
        "    def none(self):\n        return ()\n"
        "def word(kind):\n    return str(kind)\n"
        "def join(parts):\n    return len(parts)\n"
        "def compute():\n    MeasuredRuns().kind()\n    MeasuredRuns().none()\n    word(Kind.ON)\n    join(())\n"
    )
    exec(compile(source, answer_path.PACKAGE + "/sources.py", "exec"), namespace)
    stays, _ = answer_path.evidence_walk(namespace["compute"])
    assert stays == set()
