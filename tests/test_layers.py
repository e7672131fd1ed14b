"""The import rules of the package's layers, read from the source (an AST walk, imports inside functions too):

- ``analysis`` (what the book computes from the evidence) runs nothing: it imports neither ``bench`` (the
  harness that streams requests) nor ``server`` beyond ``server.variants`` (pure flag code);
- ``report`` (the rendering kit: tables, charts, sections) knows no topic: it imports no domain layer;
- ``model`` (the cost model) and ``gates`` take numbers and files, not the run store: they import no ``store``
  (the model reads runs as values, ``verifylab.sources``; the host is probed by ``verifylab.host``);
- only ``fleet/ray_runner.py`` imports Ray (the ``fleet`` extra);
- a notebook imports its chapter only (``tests/test_notebooks_thin.py``).

``KNOWN`` lists the imports that break a rule (none today); the test fails on any other, and on a listed one
that is gone, so the list only shrinks."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "verifylab"

TOPICS = (
    "analysis", "bench", "chapters", "cli", "comm", "fleet", "gates", "model", "publish", "server", "store", "synth",
    "testing", "trace",
)  # fmt: skip
_DOMAIN = tuple(f"verifylab.{layer}" for layer in TOPICS)  # report/ knows none of them
RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # layer: (forbidden prefixes, allowed exceptions)
    "analysis": (("verifylab.bench", "verifylab.server"), ("verifylab.server.variants",)),
    "report": (_DOMAIN, ()),
    "model": (("verifylab.store",), ()),
    "gates": (("verifylab.store",), ()),
}

KNOWN: set[str] = set()


def imported_modules(source: str, module: str = "") -> set[str]:
    """Every module a source imports, at top level or inside functions; a relative import (``from ..x import y``)
    is resolved against ``module``, the importing module's dotted name (a package's is its own name + ``.``)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".")[: -node.level]
            found.add(".".join([*base, node.module] if node.module else base))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def module_name(path: Path, src: Path = SRC) -> str:
    """``verifylab.model.case`` for src/verifylab/model/case.py; a package's ``__init__`` ends in a dot."""
    parts = path.relative_to(src.parent).with_suffix("").parts
    return ".".join(parts[:-1]) + "." if parts[-1] == "__init__" else ".".join(parts)


def broken_rules(src: Path = SRC) -> set[str]:
    """``layer/file.py -> module`` for every import a layer's rule forbids."""
    broken = set()
    for layer, (forbidden, allowed) in RULES.items():
        for path in sorted((src / layer).rglob("*.py")):
            for module in imported_modules(path.read_text(encoding="utf-8"), module_name(path, src)):
                if module.startswith(forbidden) and not module.startswith(allowed):
                    broken.add(f"{path.relative_to(src).as_posix()} -> {module}")
    return broken


def test_no_layer_imports_what_its_rule_forbids():
    broken = broken_rules()
    assert broken - KNOWN == set(), "a new import breaks a layer rule"
    assert KNOWN - broken == set(), "fixed: remove these from KNOWN"


def test_the_walk_resolves_relative_imports(tmp_path):
    report = tmp_path / "verifylab" / "report"
    report.mkdir(parents=True)
    (report / "x.py").write_text("from ..comm import probe\nfrom ..publish.build import render_html\n")
    assert broken_rules(tmp_path / "verifylab") == {
        "report/x.py -> verifylab.comm",
        "report/x.py -> verifylab.publish.build",
    }


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
