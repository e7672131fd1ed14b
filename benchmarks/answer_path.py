"""How far an answer's data travels (#64): the files and function-to-function steps between the functions that read
the stored runs and the public tables and the function that writes the answer's sentence.

    python benchmarks/answer_path.py [--answer decision-speculation|box-plan|both] [--edges]
    python benchmarks/answer_path.py --walk [--answer ...|model-speculation] [--edges]

``--walk`` (#78) follows the evidence's values instead of the calls: what a reader returns is the evidence's, a
function called with one (or a record holding one a level down) is a stay and what it returns is the evidence's too;
a room is a stay's file. It counts every function the values pass, not only those on a path to a reader, and adds
the README's ``model speculation`` (Kimi-K2.5 INT4, TP 8, healthy P2P, 32k).

The answer is computed once under a profiler with every derived value recomputed (a cache would hide the calls it
saves); each call from one of verifylab's functions to another is an edge. The readers are the measured runs'
methods (``sources.MeasuredRuns``) and the evidence's public tables and runs (``store.evidence.Evidence``); what lies
below them is the store, not the way to the sentence. Counted: every function on a call path from the answer's root
down to a reader, plus the root's call to the sentence's writer; steps are the distinct edges among them. A design
measure, not a timing: it changes only when the code does.

- ``decision-speculation``: the decision page's speculation answer, by context band from the nearest evidence
  (``model.answers.case_answers.case_bands``) and the model's per regime
  (``model.case.speculation.speculation_case``), both written by ``decision_markdown``
  (``model.answers.evidence_ladder.bands_words``).
- ``box-plan``: ``verifylab box --plan`` as the README's second example runs it (Kimi-K2.5 INT4 at TP 8, healthy
  P2P, 32k of context), from the command to ``cli.box_check.print_plan``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import enum
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = str(ROOT / "src" / "verifylab")
Node = tuple[str, str]  # (file under the package, qualified name)
READER_FILES = {"sources.py": "MeasuredRuns.", "store/evidence.py": "Evidence."}
STORE_READERS = {  # --count-store: the functions that open the stored files, the store's files then counted too
    "store/runs.py": "RunStore.",
    "store/public.py": "load_",
    "store/public_context.py": "load_",
    "store/public_speculation.py": "load_",
    "store/figures.py": "load_",
}
TRANSPARENT = ("<lambda>", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>")


def _node(frame) -> Node | str | None:
    code = frame.f_code
    if not code.co_filename.startswith(PACKAGE):
        return None
    name = getattr(code, "co_qualname", code.co_name)
    path = os.path.relpath(code.co_filename, PACKAGE)
    if path == "derived.py" or name.endswith(TRANSPARENT) or name.endswith(".cached"):
        return "through"  # the cache's wrapper and comprehensions pass a call on to the function behind them
    return (path, name)


def _profiled_run(compute: Callable[[], object], profile: Callable) -> None:
    """``compute`` run once under ``profile`` (a ``sys.setprofile`` hook), every derived value recomputed (a cache
    would hide the calls it saves) but the record's parts, read once per evidence as the model reads them (each
    part's first reading is under the profiler: the same functions and steps, without reading every part again at
    each use), its printing swallowed."""
    from verifylab import derived
    from verifylab.model.inputs import stored

    keep = derived.DerivedCache.value
    record = f"{stored._read_part.__module__}.{stored._read_part.__qualname__}"

    def value(self: derived.DerivedCache, key: tuple, compute: Callable[[], object]) -> object:
        return keep(self, key, compute) if key[0] == record else compute()

    derived.DerivedCache.value = value  # type: ignore[method-assign]
    sys.setprofile(profile)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            compute()
    finally:
        sys.setprofile(None)
        derived.DerivedCache.value = keep  # type: ignore[method-assign]


def call_edges(compute: Callable[[], object]) -> collections.Counter[tuple[Node, Node]]:
    """Every call from one of verifylab's functions to another while ``compute`` runs, every derived value
    recomputed."""
    edges: collections.Counter[tuple[Node, Node]] = collections.Counter()
    stack: list[Node | None] = []

    def profile(frame, event, arg) -> None:
        if event == "call":
            node = _node(frame)
            if not isinstance(node, tuple):
                stack.append(None)
                return
            caller = next((s for s in reversed(stack) if s is not None), None)
            if caller is not None and caller != node:
                edges[(caller, node)] += 1
            stack.append(node)
        elif event == "return" and stack:
            stack.pop()

    _profiled_run(compute, profile)
    return edges


def _carries(value: object, tainted: set[int]) -> bool:
    """Whether ``value`` is one of the evidence's values, or holds one a level down (a tuple's item, a mapping's
    value, a record's field)."""
    if id(value) in tainted:
        return True
    if isinstance(value, (tuple, list, frozenset, set)):
        return any(id(v) in tainted for v in value)
    if isinstance(value, dict):
        return any(id(v) in tainted for v in value.values())
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict) and type(value).__module__.startswith("verifylab"):
        return any(id(v) in tainted for v in fields.values())
    return False


def _typed_anywhere(value: object) -> bool:
    """A value anyone could have typed, and one object wherever it is typed: None, a number or a string, an enum's
    member (``Setting.ON``, ``Routing.COLLAPSED``) and an empty tuple or frozenset (one shared object each in
    CPython). Marked as the evidence's, the object itself would make every function given the same member or the
    same empty tuple anywhere a stay; the walk follows such a value through what holds it instead."""
    if value is None or isinstance(value, (bool, int, float, str, enum.Enum)):
        return True
    return isinstance(value, (tuple, frozenset)) and not value


def evidence_walk(compute: Callable[[], object]) -> tuple[set[Node], set[str]]:
    """The functions the evidence's values pass through while ``compute`` runs, every derived value recomputed:
    what a reader returns is the evidence's; a function called with one (or a record holding one) is a stay, and what
    it returns is the evidence's too. Returns the stays and their rooms (files)."""
    _, stays = profile_answer(compute)
    return stays, {path for path, _ in stays}


def profile_answer(compute: Callable[[], object]) -> tuple[collections.Counter[tuple[Node, Node]], set[Node]]:
    """One profiled run of ``compute`` (every derived value recomputed): every call from one of verifylab's functions
    to another (the path measure's edges), and the stays of the evidence's walk."""
    edges: collections.Counter[tuple[Node, Node]] = collections.Counter()
    keep_alive: list[object] = []  # a value's id stays its own while the walk runs
    tainted: set[int] = set()
    stays: set[Node] = set()
    stack: list[tuple[Node | None, bool, bool]] = []  # (function, returns the evidence's, inside a reader)

    def taint(value: object) -> None:
        if _typed_anywhere(value):
            return  # a value anyone could have typed: followed through its holder
        keep_alive.append(value)
        tainted.add(id(value))

    def profile(frame, event, arg) -> None:
        if event == "call":
            node = _node(frame)
            if not isinstance(node, tuple):
                stack.append((None, False, bool(stack) and stack[-1][2]))
                return
            caller = next((s[0] for s in reversed(stack) if s[0] is not None), None)
            if caller is not None and caller != node:
                edges[(caller, node)] += 1
            below = bool(stack) and stack[-1][2]
            if below:  # below a reader is the store: no stay there
                stack.append((node, False, True))
                return
            reader = _is_reader(node)
            code = frame.f_code
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            carried = not reader and any(_carries(frame.f_locals.get(n), tainted) for n in names)
            if carried:
                stays.add(node)
            stack.append((node, reader or carried, reader))
        elif event == "return" and stack:
            _, passes, _ = stack.pop()
            if passes:
                taint(arg)

    _profiled_run(compute, profile)
    return edges, stays


# Since #78 the record reads each part on its first use: a fit that asks the record for a part reaches the readers
# through it. For the path measure the record's accessors are where reading starts (what lies below them is the
# record reading itself); the walk (--walk) still starts at the readers themselves.
RECORD_ACCESSORS = ("Part.", "FromEvidence.", "StoredRuns.", "StoredInputs.", "stored_runs", "stored_inputs")


def _is_reader(node: Node, record: bool = False) -> bool:
    if record and node[0] == "model/inputs/stored.py" and node[1].startswith(RECORD_ACCESSORS):
        return True
    prefix = READER_FILES.get(node[0])
    return prefix is not None and node[1].startswith(prefix)


def answer_path(edges, roots: set[Node], writer: tuple[Node, Node]) -> tuple[set[Node], set[tuple[Node, Node]]]:
    """The functions on a call path from ``roots`` down to a reader, and the edges among them, plus ``writer``."""
    edges = {(a, b) for a, b in edges if not _is_reader(a, record=True)}  # below a reader is the store
    down, up = collections.defaultdict(set), collections.defaultdict(set)
    for a, b in edges:
        down[a].add(b)
        up[b].add(a)

    def reach(start: set[Node], graph) -> set[Node]:
        seen, todo = set(start), list(start)
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    below = reach(roots, down)
    readers = {n for n in below if _is_reader(n, record=True)}
    on_path = below & reach(readers, up)
    steps = {(a, b) for a, b in edges if a in on_path and b in on_path} | {writer}
    return on_path | set(writer), steps


def _decision_speculation() -> tuple[Callable[[], object], set[Node], tuple[Node, Node]]:
    from verifylab.model.answers.case_answers import case_bands
    from verifylab.model.answers.evidence_ladder import bands_words
    from verifylab.model.case.speculation import speculation_case
    from verifylab.model.inputs.stored import stored_inputs
    from verifylab.store.evidence import Evidence

    def compute() -> object:
        ev = Evidence(ROOT / "data")
        return bands_words(case_bands(ev)), speculation_case(stored_inputs(ev))

    roots = {("model/answers/case_answers.py", "case_bands"), ("model/case/speculation.py", "speculation_case")}
    writer = (("publish/decision.py", "decision_markdown"), ("model/answers/evidence_ladder.py", "bands_words"))
    return compute, roots, writer


BOX_PLAN = ["box", "--plan", "--config", "examples/configs/kimi-k2.5-int4", "--gpu", "rtx-pro-6000", "--tp", "8",
            "--regime", "healthy-p2p", "--context", "32768", "--data-dir", "data"]  # fmt: skip


def _command(argv: list[str]) -> Callable[[], object]:
    """``verifylab ARGV`` run in this process, its output returned (a failure ends the measure, named)."""

    def compute() -> object:
        from typer.testing import CliRunner

        from verifylab.cli import app

        result = CliRunner().invoke(app, argv)
        if result.exit_code != 0:
            raise SystemExit(f"{' '.join(argv[:2])} failed: {result.output[-400:]}")
        return result.output

    return compute


def _box_plan() -> tuple[Callable[[], object], set[Node], tuple[Node, Node]]:
    roots = {("cli/box.py", "_plan_and_verify")}
    return _command(BOX_PLAN), roots, (("cli/box.py", "_plan_and_verify"), ("cli/box_check.py", "print_plan"))


MODEL_SPECULATION = ["model", "speculation", "--config", "examples/configs/kimi-k2.5-int4", "--gpu", "rtx-pro-6000",
                     "--tp", "8", "--regime", "healthy-p2p", "--context", "32768", "--data-dir", "data"]  # fmt: skip


def _model_speculation() -> tuple[Callable[[], object], set[Node], tuple[Node, Node]]:
    root = ("cli/model.py", "model_speculation")
    return _command(MODEL_SPECULATION), {root}, (root, root)


ANSWERS = {"decision-speculation": _decision_speculation, "box-plan": _box_plan}
WALKS = {**ANSWERS, "model-speculation": _model_speculation}  # --walk: the README's `model speculation` too


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answer", choices=[*WALKS, "both"], default="both")
    parser.add_argument("--edges", action="store_true", help="list every step")
    parser.add_argument(
        "--walk",
        action="store_true",
        help="follow the evidence's values through every function they pass (stays) and file (rooms) instead",
    )
    parser.add_argument(
        "--count-store", action="store_true", help="start at the functions that open the stored files instead"
    )
    args = parser.parse_args()
    if args.count_store:
        READER_FILES.clear()
        READER_FILES.update(STORE_READERS)
    os.chdir(ROOT)
    os.environ["VERIFYLAB_CACHE"] = "off"
    every = WALKS if args.walk else ANSWERS
    for name in every if args.answer == "both" else [args.answer]:
        compute, roots, writer = every[name]()
        if args.walk:
            stays, rooms = evidence_walk(compute)
            print(f"{name}: the evidence's values stay in {len(stays)} functions in {len(rooms)} rooms")
            if args.edges:
                for path, qualname in sorted(stays):
                    print(f"    {path}:{qualname}")
            continue
        nodes, steps = answer_path(call_edges(compute), roots, writer)
        files = sorted({n[0] for n in nodes})
        print(f"{name}: {len(files)} files, {len(steps)} function-to-function steps")
        for path in files:
            print(f"  {path}: {', '.join(sorted(n[1] for n in nodes if n[0] == path))}")
        if args.edges:
            for a, b in sorted(steps):
                print(f"    {a[0]}:{a[1]} -> {b[0]}:{b[1]}")


if __name__ == "__main__":
    main()
