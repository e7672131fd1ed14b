"""#43: what `make book` and `make test` install. The book's lock holds no torch and no CUDA wheel; each lock names
every package pyproject.toml asks for; every third-party module verifylab imports is declared; the Makefile installs
from the locks."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_TO_DIST = {
    "yaml": "pyyaml",
    "markdown_it": "markdown-it-py",
    "vl_convert": "vl-convert-python",
    "pynvml": "nvidia-ml-py",
    "flashinfer": "flashinfer-python",
}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _locked(lock: str) -> set[str]:
    text = (ROOT / "requirements" / lock).read_text()
    return {_name(line) for line in text.splitlines() if line and not line.startswith((" ", "#"))}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_books_lock_holds_no_torch_and_no_cuda_wheel():
    book = _locked("book.lock")
    assert not {n for n in book if n in ("torch", "triton") or n.startswith(("nvidia-", "cuda-"))}
    assert "torch" in _locked("test.lock")  # the tests' lock has it (the CPU build), so the check can fail


def test_each_lock_names_everything_pyproject_asks_for():
    project = _project()
    extras = project["optional-dependencies"]
    wanted_book = {_name(r) for r in project["dependencies"] + extras["book"]}
    assert wanted_book <= _locked("book.lock")
    wanted_test = wanted_book | {_name(r) for r in extras["dev"] + extras["fleet"]}
    assert wanted_test <= _locked("test.lock")


def test_every_module_verifylab_imports_is_declared():
    project = _project()
    groups = [project["dependencies"], *project["optional-dependencies"].values()]
    declared = {_name(r) for reqs in groups for r in reqs}
    imported = set()
    for path in (ROOT / "src" / "verifylab").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"verifylab"}
    undeclared = {m for m in third_party if IMPORT_TO_DIST.get(m, m.replace("_", "-")) not in declared}
    assert undeclared == set()


def test_make_book_and_make_test_install_from_the_locks():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^book: \$\(BOOK_STAMP\)( \| pdf-browser)?$", makefile, re.M)  # Chromium for PDFs, order-only
    book_recipe = makefile.split("$(BOOK_STAMP): ")[1].split("\n\n")[0]
    assert "-r $(BOOK_LOCK)" in book_recipe and "--no-deps -e ." in book_recipe and "[" not in book_recipe
    test_recipe = makefile.split("$(STAMP): ")[1].split("\n\n")[0]
    assert "-r $(TEST_LOCK)" in test_recipe and "--no-deps -e ." in test_recipe


def test_an_edition_names_its_toolchain_and_a_differing_one_is_named():
    from verifylab.publish.toolchain import toolchain_differences, toolchain_versions

    now = toolchain_versions()
    assert now["python"] == f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    assert {"jupyter-book", "sphinx", "myst-nb", "altair", "vl-convert-python", "pandas"} <= set(now)
    registry = [{"id": "old", "toolchain": {**now, "sphinx": "0.1"}}, {"id": "none-recorded"}]
    assert toolchain_differences(registry, now) == [f"sphinx {now['sphinx']} here, 0.1 in edition old"]
    assert toolchain_differences([{"id": "same", "toolchain": now}], now) == []


def test_every_subprocess_verifylab_starts_has_a_timeout():
    """#43 item 4: a subprocess.run without a timeout can hang a command for good; Popen (servers, ranks, kernels)
    is watched by its own deadlines and is not counted here."""
    missing = []
    for path in (ROOT / "src" / "verifylab").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("run", "check_output", "check_call", "call")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "subprocess"
                and not any(k.arg == "timeout" for k in node.keywords)
            ):
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert missing == []


def test_make_book_installs_playwright_so_it_prints_the_pdfs_wherever_chromium_is():
    """#54 item 3: the book's environment (make book installs only the book lock) has playwright, which drives the
    system's Chromium; no browser is downloaded."""
    assert "playwright" in {_name(r) for r in _project()["optional-dependencies"]["book"]}
    assert "playwright" in _locked("book.lock")
