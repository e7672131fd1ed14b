"""#82: every command the project prints runs as printed, by class (``tests/printed_commands.py``): README.md,
CONTRIBUTING.md and every command's ``--help`` here; the book's pages (every command on them, every SGLang launch line
against the audited flags of its version, every Reproduce line's exhibit) in the slow lane. A planted broken README
command of each kind is found."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

from .printed_commands import ROOT, Printed, check, commands_in, help_commands

SHOWN = ("data", "examples", "benchmarks", "notebooks", "_config.yml")  # what a printed command reads from the checkout
EXCEPTIONS: dict[str, str] = {}  # printed command -> why it cannot hold its class (can only shrink)


@pytest.fixture
def replay(tmp_path, monkeypatch):
    """Runs a printed verifylab command as printed in a fresh folder holding the checkout's data and examples (a
    path under /tmp/ lands in the test's folder); "" when it exits 0, else its exit code and last lines."""
    for name in SHOWN:
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)

    def run(p: Printed) -> str:
        argv = [str(tmp_path / a.removeprefix("/tmp/")) if a.startswith("/tmp/") else a for a in p.argv[1:]]
        result = CliRunner().invoke(app, argv)
        if result.exit_code == 0:
            return ""
        return f"exit {result.exit_code}: {' '.join(result.output.split()[-40:])}"

    return run


def _printed() -> list[Printed]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    return commands_in(readme, "README.md") + commands_in(contributing, "CONTRIBUTING.md") + help_commands()


def test_every_printed_command_holds_its_class(replay):
    printed = _printed()
    assert len(printed) > 100 and sum(p.argv[0] == "verifylab" for p in printed) > 60
    failures = [f for f in check(printed, replay) if not any(f.startswith(e) for e in EXCEPTIONS)]
    assert failures == []


PLANTED = {  # a broken README command of each kind -> what the check must say of it
    "verifylab model speculation --config examples/configs/kimi-k2.5-int4 --gpu h200 --regme healthy-p2p":
        "No such option",
    "verifylab box --probe 20990101-000000-never-stored --config examples/configs/qwen3-30b-a3b":
        "not found in data/runs",
    "pip install 'verifylab[fleet]'": "not this checkout",
    "make bookk": "no make target bookk",
    "verifylab box --plan --gpu h200 --verify benchmarks/box/verify-h200.yaml": "its tokens unfilled",
    "bash install/gpu-box.sh @PYTHON@": "a template token of the build (@PYTHON@)",
    "papermill /tmp/02.ipynb /tmp/02.out.ipynb -p mode live -p label box": "live mode needs the model SGLang serves",
    "verifylab exhibit NAME --cvs FILE": "no option --cvs",
}  # fmt: skip


@pytest.mark.parametrize("planted", list(PLANTED))
def test_a_planted_broken_readme_command_is_found(replay, planted):
    """The README with one broken command added: the check names it (the README's own commands hold, above)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8") + f"\n```bash\n{planted}\n```\n"
    added = [p for p in commands_in(readme, "README.md") if p.text == planted]
    failures = check(added, replay)
    assert len(added) == 1 and len(failures) == 1, failures
    assert planted in failures[0] and PLANTED[planted] in failures[0], failures


# ---- the book's pages (slow: the built book)


def _page_text(page: Path) -> tuple[list[str], str]:
    """A page's code (each <pre> block and <code> span, as text) and its whole text."""
    raw = page.read_text(encoding="utf-8")
    raw = re.sub(r"<script.*?</script>|<style.*?</style>", "", raw, flags=re.S)
    code = [html.unescape(re.sub(r"<[^>]+>", "", m)) for m in re.findall(r"<(?:pre|code)[^>]*>(.*?)</(?:pre|code)>",
                                                                         raw, re.S)]  # fmt: skip
    return code, html.unescape(re.sub(r"<[^>]+>", " ", raw))


def _launch_problems(text: str, page: str) -> list[str]:
    """Every SGLang launch line on a page against the audited flags (and variables) of the version it is built for
    (the nearest ``SGLang X.Y.Z`` before it, else the recommended one)."""
    from verifylab.store.evidence import Evidence
    from verifylab.vocab import RECOMMENDED_STACK

    ev, problems = Evidence(ROOT / "data"), []
    flat = re.sub(r"\\\s+", " ", text)
    for found in re.finditer(
        r"((?:[A-Z_]+=\S+ )*)python3? -m sglang\.launch_server((?: +(?:--?[\w-]+|'[^']*'|\S+))*)", flat
    ):
        before = re.findall(r"SGLang (\d+\.\d+\.\d+)", flat[: found.start()])
        target = ev.launch_target(before[-1] if before else RECOMMENDED_STACK[0])
        flags = set(re.findall(r"(?<!\S)(--[a-z][\w-]*)", found.group(2)))
        unknown = sorted(flags - target.flags)
        env = set(re.findall(r"([A-Z_]+)=", found.group(1)))
        unread = sorted(env - set(target.env_names or env))
        if unknown or unread:
            problems.append(f"{page}: a launch line for SGLang {target.version}: {unknown + unread} not in its audit")
    return problems


@pytest.mark.slow
def test_every_command_on_the_books_pages_holds_its_class(built_book, replay):
    from verifylab.chapters.exhibits import book_exhibits

    pages = sorted((built_book / "book" / "_generated").glob("*.html"))
    assert any(p.name == "decision.html" for p in pages) and any(p.name.startswith("05_") for p in pages)
    printed, failures, known = [], [], set(book_exhibits(ROOT))
    for page in pages:
        code, text = _page_text(page)
        for block in code:  # a page names commands in passing (Reproduce lines, a table's cell): resolved, not run
            printed += [
                Printed(page.name, p.text, p.argv, inline=True)
                for p in commands_in(f"```bash\n{block}\n```", page.name)
            ]
        failures += _launch_problems(text, page.name)
    reproduce = [p for p in printed if p.argv[:2] == ("verifylab", "exhibit") and len(p.argv) > 2]
    assert len(reproduce) > 30  # every numbered exhibit says how to rebuild it
    failures += [f"{p.where}: {p.text}: no exhibit {p.argv[2]!r}" for p in reproduce if p.argv[2] not in known]
    assert check(printed, replay) + failures == []
