"""The import rules of the package's layers, read from the source (an AST walk, imports inside functions too):

- ``analysis`` (what the book computes from the evidence) runs nothing: it imports neither ``bench`` (the
  harness that streams requests) nor ``server`` beyond ``server.variants`` (pure flag code);
- ``report`` (the rendering kit: tables, charts, sections) knows no topic: it imports no domain layer;
- ``model`` (the cost model) and ``gates`` take numbers and files, not the run store: they import no ``store``
  (the model reads runs as values, ``verifylab.sources``; the host is probed by ``verifylab.host``);
- only ``fleet/ray_runner.py`` imports Ray (the ``fleet`` extra);
- every module stands on a floor (:data:`FLOORS`) and imports only from its own floor or below;
- a notebook imports its chapter only (``tests/test_notebooks_thin.py``).

``KNOWN`` lists the imports that break a rule (none since #78); the test fails on any other, and on a listed one
that is gone, so the list only shrinks."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "verifylab"

TOPICS = (
    "analysis", "bench", "chapters", "cli", "comm", "fleet", "gates", "model", "publish", "server", "store", "synth",
    "testing", "trace",
)  # fmt: skip
_DOMAIN = tuple(f"verifylab.{layer}" for layer in TOPICS)  # report/ knows none of them
_RUNS_THINGS = (  # what starts processes, touches GPUs or edits installed code: the measuring and patching side
    "verifylab.bench",
    "verifylab.server",
    "verifylab.comm.probe",
    "verifylab.comm.rank",
    "verifylab.synth",
    "verifylab.gates.patch",
    "verifylab.gates.opening",
)
_PRODUCT = tuple(layer for layer in TOPICS if layer != "testing")
# The model's doors (#78): the book's publisher and the command line take answers only (``model.answers``); the
# analyses and chapters take answers plus one read-only view for exhibits (``model.views``: what was fitted, held out
# and tabled, so an exhibit shows predicted beside measured); the fits, the pricing and the case study take the
# record read at the bottom (``model.inputs``), never the evidence's reader (``verifylab.sources``).
ANSWERS, VIEWS = "verifylab.model.answers", "verifylab.model.views"
RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # layer: (forbidden prefixes, allowed exceptions)
    "analysis": (
        (*_RUNS_THINGS, "verifylab.testing", "verifylab.model"),
        ("verifylab.server.variants", ANSWERS, VIEWS),
    ),
    "chapters": (("verifylab.testing", "verifylab.model"), (ANSWERS, VIEWS)),
    "publish": (("verifylab.testing", "verifylab.model"), (ANSWERS,)),
    "cli": (("verifylab.testing", "verifylab.model"), (ANSWERS,)),
    "report": (_DOMAIN, ()),
    "model": ((*_RUNS_THINGS, "verifylab.store", "verifylab.testing"), ()),
    **{f"model/{floor}": (("verifylab.sources",), ()) for floor in ("pricing", "fits", "case")},
    "gates": (("verifylab.store", "verifylab.testing"), ()),
    **{
        layer: (("verifylab.testing",), ())
        for layer in _PRODUCT
        if layer not in ("analysis", "chapters", "publish", "cli", "model", "gates", "report")
    },
}

# Imports a rule forbids that are left for now; the list only shrinks. Empty since #78's record took the last fit that
# read the evidence's runs itself: every function of the model's fits, pricing and case study takes the record.
KNOWN: set[str] = set()


@functools.cache
def parsed(source: str) -> ast.Module:
    """``source``'s syntax tree, parsed once per text: every rule reads the same trees, and a copy of the tree with
    one file changed parses only that file again (the rules only read a tree)."""
    return ast.parse(source)


@functools.cache
def nodes(source: str) -> tuple[ast.AST, ...]:
    """Every node of ``source``'s tree, walked once per text: the rules each read every node (a walk costs more than
    the parse), and the planted copies read the same trees again."""
    return tuple(ast.walk(parsed(source)))


@functools.cache
def imported_modules(source: str, module: str = "") -> frozenset[str]:
    """Every module a source imports, at top level or inside functions; a relative import (``from ..x import y``)
    is resolved against ``module``, the importing module's dotted name (a package's is its own name + ``.``)."""
    found = set()
    for node in nodes(source):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = (node.module or "").split(".")
            else:
                base = module.split(".")[: -node.level] + (node.module.split(".") if node.module else [])
            found.add(".".join(base))
            # ``from .. import store`` and ``from verifylab import store`` import the module they name
            found.update(".".join([*base, alias.name]) for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return frozenset(found)


def module_name(path: Path, src: Path = SRC) -> str:
    """``verifylab.model.case`` for src/verifylab/model/case.py; a package's ``__init__`` ends in a dot."""
    parts = path.relative_to(src.parent).with_suffix("").parts
    return ".".join(parts[:-1]) + "." if parts[-1] == "__init__" else ".".join(parts)


def broken_rules(src: Path = SRC) -> set[str]:
    """``layer/file.py -> module`` for every import a layer's rule forbids."""
    broken = set()
    for layer, (forbidden, allowed) in RULES.items():
        for path in sorted((src / layer).rglob("*.py")):
            modules = imported_modules(path.read_text(encoding="utf-8"), module_name(path, src))
            bad = {m for m in modules if m.startswith(forbidden) and not m.startswith(allowed)}
            for module in bad:
                if not any(module.startswith(other + ".") for other in bad):  # a name inside it: the module says it
                    broken.add(f"{path.relative_to(src).as_posix()} -> {module}")
    return broken


def test_no_layer_imports_what_its_rule_forbids():
    broken = broken_rules()
    assert broken - KNOWN == set(), "a new import breaks a layer rule"
    assert KNOWN - broken == set(), "fixed: remove these from KNOWN"


# A module found by name at run time is an import the rules above cannot see: only the exhibits' loader (a chapter
# module named by the notebook's cell) and the multicast guard (it wraps the CUDA bindings' loader) do it.
DYNAMIC_IMPORTERS = {"chapters/exhibits.py", "guard/site/sitecustomize.py"}
_DYNAMIC = {"import_module", "__import__", "spec_from_file_location", "exec_module"}


def dynamic_imports(src: Path = SRC) -> set[str]:
    """``file:line`` for every call that imports a module by name outside :data:`DYNAMIC_IMPORTERS`."""
    found = set()
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel in DYNAMIC_IMPORTERS:
            continue
        for node in nodes(path.read_text(encoding="utf-8")):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in _DYNAMIC:
                found.add(f"{rel}:{node.lineno}")
    return found


FAULT_NAME = re.compile(r"(^|_)FAULT(_|$)")  # VERIFYLAB_FAULT_WRITE, FAULT_RANK; not DEFAULT


def _is_environ(node: ast.AST) -> bool:
    return getattr(node, "attr", getattr(node, "id", "")) == "environ"


def fault_switches(src: Path = SRC) -> set[str]:
    """``file:line`` for every read of an environment variable named for a fault (``os.getenv``, ``environ.get``,
    ``environ[...]``, ``... in environ``) outside ``testing/``: a fault is a test double's, installed by the test,
    never a switch the product reads."""
    found = set()
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel.startswith("testing/"):
            continue
        for node in nodes(path.read_text(encoding="utf-8")):
            if isinstance(node, ast.Call):
                f = node.func
                reads = getattr(f, "attr", getattr(f, "id", "")) == "getenv" or (
                    isinstance(f, ast.Attribute) and f.attr == "get" and _is_environ(f.value)
                )
                names = node.args[:1]
            elif isinstance(node, ast.Subscript):
                reads, names = _is_environ(node.value), [node.slice]
            elif isinstance(node, ast.Compare):
                reads, names = any(_is_environ(c) for c in node.comparators), [node.left]
            else:
                continue
            if reads and any(
                isinstance(c, ast.Constant) and isinstance(c.value, str) and FAULT_NAME.search(c.value)
                for name in names
                for c in ast.walk(name)
            ):
                found.add(f"{rel}:{node.lineno}")
    return found


PASS_TIMES = ("step_ms", "cycle_ms", "verify_ms", "pass_ms")  # a name that holds a step, cycle, verify or pass time
PRICER_FILES = {"model/pricing/pricer.py", "model/pricing/pass_cost.py"}


def own_pass_prices(src: Path = SRC) -> set[str]:
    """``file:function`` for every model function outside the pricer that computes two pass times itself (names of
    :data:`PASS_TIMES` bound to arithmetic) and divides by one: a step and a cycle priced beside the pricer, their
    ratio a gain no comparison (``pass_cost.compare``) made."""
    found = set()
    for path in sorted((src / "model").rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel in PRICER_FILES:
            continue
        for function in nodes(path.read_text(encoding="utf-8")):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            computed = {
                target.id
                for node in ast.walk(function)
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp)
                for target in node.targets
                if isinstance(target, ast.Name) and target.id.endswith(PASS_TIMES)
            }
            if len(computed) >= 2 and any(
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Div)
                and {n.id for n in ast.walk(node.right) if isinstance(n, ast.Name)} & computed
                for node in ast.walk(function)
            ):
                found.add(f"{rel}:{function.name}")
    return found


READ_BACK = {"startswith", "endswith", "split", "partition", "removeprefix", "find", "index"}


def answers_read_back(src: Path = SRC) -> set[str]:
    """``file:line`` wherever an answer's words (an attribute or name ending ``_answer``) are taken apart to decide
    something: a decision travels as its typed setting, its words only say it."""
    found = set()
    for path in sorted(src.rglob("*.py")):
        for node in nodes(path.read_text(encoding="utf-8")):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
            if node.func.attr in READ_BACK and name.endswith("_answer"):
                found.add(f"{path.relative_to(src).as_posix()}:{node.lineno}")
    return found


def layer_violations(src: Path = SRC) -> set[str]:
    """Everything the layers' rules refuse: a forbidden import not in :data:`KNOWN`, a module imported by name, a
    fault switch read from the environment, a pass priced beside the pricer, an answer read back from its words."""
    return (
        (broken_rules(src) - KNOWN)
        | {f"dynamic import {d}" for d in dynamic_imports(src)}
        | {f"fault switch {f}" for f in fault_switches(src)}
        | {f"own pass price {p}" for p in own_pass_prices(src)}
        | {f"answer read back {a}" for a in answers_read_back(src)}
    )


def test_nothing_goes_round_the_models_doors():
    assert layer_violations() == set()


PLANTED_VIOLATIONS = {  # file -> (what is planted at its end, the violation it must be)
    "publish/decision.py": (
        "from verifylab.model.pricing.pricer import price_verify",
        "publish/decision.py -> verifylab.model.pricing.pricer",
    ),
    "cli/model.py": ("from verifylab.model.fits.grid import fit_grid", "cli/model.py -> verifylab.model.fits.grid"),
    "model/fits/grid.py": ("from verifylab.sources import MeasuredRuns", "model/fits/grid.py -> verifylab.sources"),
    "analysis/speculation_load.py": (
        'import importlib\n_OPTIONS = importlib.import_module("verifylab.model.case.options")',
        "dynamic import analysis/speculation_load.py:",
    ),
    "iorw.py": ('import os\nif os.environ.get("VERIFYLAB_FAULT_WRITE"):\n    pass', "fault switch iorw.py:"),
    "model/fits/context.py": (
        "def _gain(step, rate, added):\n    step_ms = step + added\n    cycle_ms = rate * 3 + added\n"
        "    return (3 / cycle_ms) / (1 / step_ms)",
        "own pass price model/fits/context.py:_gain",
    ),
    "publish/box_page.py": (
        "def _headline(d):\n    return 'on' if d.speculation_answer.startswith('on') else 'off'",
        "answer read back publish/box_page.py:",
    ),
}


@pytest.mark.parametrize("file", list(PLANTED_VIOLATIONS))
def test_a_planted_way_round_the_doors_is_named(tmp_path, file):
    """In a copy of the tree, each planted violation is what the layers' rules find: the publisher importing the
    pricer, the command line a fit, a fit the evidence's reader, an analysis a module by name, the write layer a
    fault switch, the context fit dividing two pass times it computed."""
    import shutil

    copy = tmp_path / "verifylab"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    planted, expected = PLANTED_VIOLATIONS[file]
    target = copy / file
    target.write_text(target.read_text(encoding="utf-8") + "\n" + planted + "\n", encoding="utf-8")
    found = layer_violations(copy)
    assert len(found) == 1 and next(iter(found)).startswith(expected), found


def test_the_walk_resolves_relative_imports(tmp_path):
    report = tmp_path / "verifylab" / "report"
    report.mkdir(parents=True)
    (report / "x.py").write_text("from ..comm import probe\nfrom ..publish.build import render_html\n")
    assert broken_rules(tmp_path / "verifylab") == {
        "report/x.py -> verifylab.comm",
        "report/x.py -> verifylab.publish.build",
    }


def test_the_holes_are_closed(tmp_path):
    """A model importing the probe, an analysis importing the synthetic pass or the gate patcher, product code
    importing a test double, and ``from .. import store`` / ``from verifylab import testing`` are all caught."""
    root = tmp_path / "verifylab"
    for layer, text in {
        "model": "from verifylab.comm.probe import run_probe\nfrom .. import store\n",
        "analysis": "from ..synth import runner\nfrom verifylab.gates.patch import apply\n",
        "publish": "from verifylab import testing\n",
    }.items():
        (root / layer).mkdir(parents=True)
        (root / layer / "x.py").write_text(text)
    assert broken_rules(root) == {
        "model/x.py -> verifylab.comm.probe",
        "model/x.py -> verifylab.store",
        "analysis/x.py -> verifylab.synth",
        "analysis/x.py -> verifylab.gates.patch",
        "publish/x.py -> verifylab.testing",
    }


# Floors, from the ground up: a module imports only from its own floor or below, and every module of the package
# stands on one (a new top-level module or package without a floor fails). Within ``model`` the concepts are floors
# of their own: what it reads, what a pass costs, what is fitted, the case study's account, the answers.
FLOORS: tuple[tuple[str, ...], ...] = (
    (  # facts and plumbing: no domain
        "verifylab", "verifylab.errors", "verifylab.vocab", "verifylab.span", "verifylab.command_line",
        "verifylab.derived", "verifylab.iorw", "verifylab.intake", "verifylab.redact", "verifylab.shapes",
        "verifylab.selection", "verifylab.stats", "verifylab.strict_yaml", "verifylab.lifetime", "verifylab.guard",
        "verifylab.rendezvous",
        "verifylab.launch", "verifylab.data", "verifylab.csv_cells", "verifylab.reported",
    ),
    ("verifylab.host", "verifylab.sources", "verifylab.report"),  # the machine; what the model reads; rendering
    ("verifylab.store", "verifylab.gates"),  # the run store; the installed gates
    ("verifylab.trace",),
    ("verifylab.synth",),
    ("verifylab.comm",),
    ("verifylab.model.inputs",),
    ("verifylab.model.pricing",),
    ("verifylab.model.fits",),
    ("verifylab.model.case",),
    ("verifylab.model.answers", "verifylab.model.views", "verifylab.model"),
    ("verifylab.server",),
    ("verifylab.bench", "verifylab.analysis"),
    ("verifylab.chapters",),
    ("verifylab.publish",),
    ("verifylab.fleet",),
    ("verifylab.cli", "verifylab.entry"),  # the console entry point: a kept answer, else the app
    ("verifylab.testing",),  # test doubles: nothing of the product stands on them
)  # fmt: skip


def floor_of(module: str) -> int | None:
    """The floor (0: the ground) of a dotted module name: its longest prefix in :data:`FLOORS`."""
    best, found = -1, None
    for level, names in enumerate(FLOORS):
        for name in names:
            inside = module.startswith(name + ".") and name != "verifylab"  # the package's own __init__: itself only
            if (module == name or inside) and len(name) > best:
                best, found = len(name), level
    return found


def floor_breaks(src: Path = SRC) -> set[str]:
    """``module -> imported`` for every import from a higher floor, and ``module -> (no floor)`` for a module on
    none."""
    broken = set()
    for module, targets in import_graph(src).items():
        level = floor_of(module)
        if level is None:
            broken.add(f"{module} -> (no floor)")
            continue
        for target in targets:
            other = floor_of(target)
            if other is not None and other > level:
                broken.add(f"{module} -> {target}")
    return broken


def test_every_module_imports_from_its_own_floor_or_below():
    assert floor_breaks() == set()


PLANTED_IMPORTS = {  # file -> the import planted in it, and the break the floors must name
    "store/runs.py": ("from verifylab.model.pricing.pricer import price_verify", "verifylab.store.runs"),
    "vocab.py": ("from verifylab.testing import server", "verifylab.vocab"),
    "model/case/cycle.py": ("from verifylab.publish import decision", "verifylab.model.case.cycle"),
    "analysis/facts.py": ("import verifylab.cli.box", "verifylab.analysis.facts"),
    "span.py": ("from verifylab.cli import _shared", "verifylab.span"),
}


@pytest.mark.parametrize("file", list(PLANTED_IMPORTS))
def test_a_planted_import_up_a_floor_is_named(tmp_path, file):
    """In a copy of the tree, each import planted from a floor to a higher one is the one break found: the store
    importing the pricer, ``vocab`` a test double, the model the publisher, an analysis the command line, a
    ground-floor module the command line."""
    import shutil

    copy = tmp_path / "verifylab"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    line, module = PLANTED_IMPORTS[file]
    target = copy / file
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    broken = floor_breaks(copy)
    assert broken and all(b.startswith(f"{module} -> ") for b in broken), broken


def test_a_module_on_no_floor_is_named(tmp_path):
    package = tmp_path / "verifylab"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "newthing.py").write_text("from verifylab import errors\n")
    (package / "errors.py").write_text("")
    assert floor_breaks(package) == {"verifylab.newthing -> (no floor)"}


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """verifylab module -> the verifylab modules it imports (anywhere in it); a package's import of its own parent
    package is left out (``gates/x.py`` importing ``verifylab.gates`` names its package, not a circle)."""
    names = {module_name(p, src).rstrip("."): p for p in src.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        targets = set()
        for module in imported_modules(path.read_text(encoding="utf-8"), module_name(path, src)):
            while module and module not in names:  # "verifylab.model.case.inputs" -> its module
                module = module.rpartition(".")[0]
            if module and module != name and not name.startswith(module + "."):
                targets.add(module)
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_module_imports_itself_round_a_circle():
    """#44 item 4: an import inside a function hid model.case <-> model.reconcile; every import counts here."""
    assert circles(import_graph()) == []
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check can fail


def test_the_walk_finds_imports_inside_functions(tmp_path):
    analysis = tmp_path / "analysis"
    analysis.mkdir()
    (analysis / "x.py").write_text(
        "from verifylab.server.variants import BaseConfig\n"
        "def f():\n    from verifylab.bench.method import summarize\n    import verifylab.server.launch\n"
    )
    assert broken_rules(tmp_path) == {
        "analysis/x.py -> verifylab.bench.method",
        "analysis/x.py -> verifylab.server.launch",
    }


def test_ray_is_imported_by_the_fleet_driver_only():
    """Ray is an optional extra: one module imports it, and nothing imports that module but the fleet CLI."""
    importers = set()
    for path in sorted(SRC.rglob("*.py")):
        modules = imported_modules(path.read_text(encoding="utf-8"))
        rel = path.relative_to(SRC).as_posix()
        if any(m == "ray" or m.startswith("ray.") for m in modules):
            importers.add(rel)
        if "verifylab.fleet.ray_runner" in modules:
            assert rel == "cli/fleet.py", f"{rel} imports the Ray driver"
    assert importers == {"fleet/ray_runner.py"}


def test_the_command_line_starts_without_the_data_stack():
    """``verifylab`` starts light (its subcommands load pandas and the rest when they need them): tests, ranks and
    boxes start it dozens of times, and pandas alone would double its start-up."""
    import subprocess
    import sys

    heavy = ("pandas", "pyarrow", "altair", "torch", "ray", "papermill", "importlib.metadata")  # the last: __version__
    code = f"import sys, verifylab.cli; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# Where a file is written directly, and why that is not a result someone could find half-written (#44 item 4):
# everything else goes through verifylab.iorw (temporary file + rename).
DIRECT_WRITES = {
    "chapters/notebook_cell.py:sync_notebooks:write_text": "a temporary file, renamed over the notebook after",
    "comm/probe.py:_run_ranks:open-for-writing": "a rank's stderr in the probe's private work folder",
    "fleet/pack.py:pack_runs:open-for-writing": "a tar in memory (a BytesIO)",
    "publish/chapter_reads.py:track:open-for-writing": "a kernel's log of its reads, in the build's private folder",
    "publish/ipc_kernel.py:_async_launch_kernel:open-for-writing": "the kernel's own log, in its private folder",
    "gates/matrix.py:unpack_sources:write_text": "a marker in a staging folder that is renamed in whole",
    "server/launch.py:start:open-for-writing": "the server's raw log, streamed by the server into a private folder",
    "synth/runner.py:_worker:open-for-writing": "a .partial file renamed when complete",
    "testing/fake_trace.py:write_fake_trace:open-for-writing": "the test double's fake traces",
    "testing/fake_trace.py:write_fake_trace:dump": "the test double's fake traces",
}


def direct_writes(src: Path = SRC) -> set[str]:
    """``file:function:how`` for every call that writes a file without ``verifylab.iorw``: write_text/bytes,
    to_csv/to_parquet with a path, json/yaml.dump to a handle, nbformat.write, open(..., 'w'/'a'/'x')."""
    found = set()
    for path in sorted(src.rglob("*.py")):
        if path.name == "iorw.py":
            continue
        tree = parsed(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            how = _write_kind(node) if isinstance(node, ast.Call) else None
            if how and not _inside_atomic_writer(node, parents):
                scope = node
                while scope in parents and not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                    scope = parents[scope]
                found.add(f"{path.relative_to(src).as_posix()}:{getattr(scope, 'name', '<module>')}:{how}")
    return found


def _inside_atomic_writer(node: ast.AST, parents: dict) -> bool:
    """A write inside the writer given to ``atomic_write_with`` fills its temporary file."""
    while node in parents:
        node = parents[node]
        name = getattr(node.func, "id", getattr(node.func, "attr", "")) if isinstance(node, ast.Call) else ""
        if name == "atomic_write_with":
            return True
    return False


def _write_kind(call: ast.Call) -> str | None:
    f = call.func
    owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
    if isinstance(f, ast.Attribute):
        if f.attr in ("write_text", "write_bytes"):
            return f.attr
        if f.attr in ("to_csv", "to_parquet") and (call.args or any(k.arg == "path_or_buf" for k in call.keywords)):
            return f.attr  # with a path: it writes (without one, to_csv returns the text)
        if f.attr == "dump" and owner in ("json", "yaml"):
            return "dump"
        if f.attr == "write" and owner == "nbformat":
            return "nbformat.write"
    if (isinstance(f, ast.Name) and f.id == "open") or (isinstance(f, ast.Attribute) and f.attr == "open"):
        modes = call.args[1:2] + [k.value for k in call.keywords if k.arg == "mode"]
        if any(isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax") for m in modes):
            return "open-for-writing"
    return None


def test_every_write_is_temp_file_and_rename_or_says_why_not():
    assert direct_writes() - set(DIRECT_WRITES) == set(), "write through verifylab.iorw, or add it here with why"
    assert set(DIRECT_WRITES) - direct_writes() == set(), "gone: remove it from DIRECT_WRITES"


def test_the_write_check_finds_a_direct_write(tmp_path):
    (tmp_path / "x.py").write_text("def save(p, df):\n    p.write_text('x')\n    df.to_csv(p)\n")
    assert direct_writes(tmp_path) == {"x.py:save:write_text", "x.py:save:to_csv"}


# verifylab's own modules imported inside a function, outside cli/ (whose commands import what they use when they
# run, so `verifylab --help` stays light): each for a reason; a new one fails here until it is hoisted or listed.
LAZY_IMPORTS = {
    "entry.py -> verifylab.cli": "the app is imported only when no kept answer is given: a kept one costs no import",
    "chapters/ch01_environment_and_gates.py -> verifylab.comm.probe": "live mode only: the probe starts ranks",
    "chapters/ch01_environment_and_gates.py -> verifylab.comm.record": "live mode only: it stores what the probe made",
    "comm/rank.py -> verifylab.synth.cuda": "a rank that captures a CUDA graph: torch",
    "comm/rank.py -> verifylab.synth.flashinfer_fusion": "a rank that times the fused kernel: FlashInfer",
    "comm/rank.py -> verifylab.synth.verify_pass": "a rank that checks a fused result: torch",
    "publish/build.py -> verifylab.chapters.notebook_cell": "jupytext: only when a chapter is converted",
    "publish/build.py -> verifylab.publish.cell_progress": "papermill's engine: only when a chapter executes",
    "publish/build.py -> verifylab.publish.ipc_kernel": "jupyter_client: only when a chapter executes",
    "synth/runner.py -> verifylab.synth": "torch: inside the rank process",
    "synth/runner.py -> verifylab.synth.cuda": "torch: inside the rank process",
    "synth/runner.py -> verifylab.synth.flashinfer_fusion": "FlashInfer: inside the rank process, fused variant only",
    "testing/faults.py -> verifylab": "the test double imports what it patches only when its fault is installed",
    "testing/faults.py -> verifylab.comm": "the test double patches the probe's ranks only for a rank fault",
    "testing/faults.py -> verifylab.synth": "the test double patches the synthetic pass's ranks only for a rank fault",
}


def lazy_imports(src: Path = SRC) -> set[str]:
    """``file -> module`` for every verifylab module imported inside a function, outside cli/."""
    found = set()
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel.startswith("cli/"):
            continue
        for function in nodes(path.read_text(encoding="utf-8")):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(function):
                    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("verifylab"):
                        found.add(f"{rel} -> {node.module}")
    return found


def test_an_import_inside_a_function_has_its_reason():
    found = lazy_imports()
    assert found - set(LAZY_IMPORTS) == set(), "hoist these to the top of their module, or list them with a reason"
    assert set(LAZY_IMPORTS) - found == set(), "no longer inside a function: remove from LAZY_IMPORTS"
    assert all(LAZY_IMPORTS.values())
