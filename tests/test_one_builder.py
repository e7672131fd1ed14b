"""#65: one launch-command builder. Every SGLang option string a module produces comes from
:func:`verifylab.launch.build_command` (a test double's own command line and an audit of the wheels' flags aside):
a second builder elsewhere, whatever its name, is found by the flags it writes. And every command the book and the
command line print for a TP > 1 layout carries that layout's ``--tp-size``."""

from __future__ import annotations

import ast
import csv
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.launch import AllReduce, LaunchTarget, SglangLaunch, build_command

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "verifylab"
BUILDER = "launch.py"
EXEMPT = ("testing/", "gates/")  # a test double's own options; the audit that reads the wheels' flags
READING = {"index", "count", "startswith", "removeprefix"}  # a call that reads a command, not one that writes it
SGLANG_FLAGS = frozenset(row["flag"] for row in csv.DictReader((ROOT / "data" / "gates" / "sglang_flags.csv").open()))
QWEN = ROOT / "tests" / "data" / "spec_models" / "target" / "config.json"


def option_strings_outside_the_builder(src: Path = SRC, flags: frozenset[str] = SGLANG_FLAGS) -> set[str]:
    """``file:line: flag`` for every SGLang option a module writes outside the builder: the option as a string of
    its own (not compared with, nor looked up in, a command), or an f-string that is an option and its value."""
    found = set()
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel == BUILDER or rel.startswith(EXEMPT):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            parent = parents.get(node)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in flags:
                reading = isinstance(parent, ast.Compare) or (
                    isinstance(parent, ast.Call) and getattr(parent.func, "attr", "") in READING
                )
                if not reading:
                    found.add(f"{rel}:{node.lineno}: {node.value}")
            head = node.values[0] if isinstance(node, ast.JoinedStr) and len(node.values) == 2 else None
            option = re.fullmatch(r"(--[a-z0-9-]+)[= ]", str(head.value)) if isinstance(head, ast.Constant) else None
            if option and option.group(1) in flags:
                found.add(f"{rel}:{node.lineno}: {option.group(1)}")
    return found


def test_no_module_but_the_builder_writes_an_sglang_option():
    assert option_strings_outside_the_builder() == set()


def test_a_planted_second_builder_is_found(tmp_path):
    """The scan is not blind: options written as a list, a tuple or an f-string are each found; reading one is not."""
    package = tmp_path / "verifylab"
    package.mkdir()
    (package / "x.py").write_text(
        "def command(tp, port, args):\n"
        '    out = ["--tp-size", str(tp)]\n'
        '    out += ("--speculative-algorithm", "EAGLE3")\n'
        '    out.append(f"--port={port}")\n'
        '    if "--max-running-requests" in args:\n'
        '        out.append(args[args.index("--max-running-requests") + 1])\n'
        "    return out\n"
    )
    assert option_strings_outside_the_builder(package) == {
        "x.py:2: --tp-size",
        "x.py:3: --speculative-algorithm",
        "x.py:4: --port",
    }


@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("allreduce", list(AllReduce))
def test_the_builder_always_writes_the_layout_s_tp_size(tp, allreduce):
    target = LaunchTarget("every option", SGLANG_FLAGS)
    args = build_command(SglangLaunch(tp_size=tp, allreduce=allreduce), target).args
    assert args[args.index("--tp-size") + 1] == str(tp)


COMMAND = re.compile(r"\S*python\S* -m sglang\.launch_server\s+--.*")  # a launch command, its flags after it


def _tp_sizes(text: str) -> list[int]:
    """The ``--tp-size`` of every SGLang launch command in ``text`` (0: a command that has none)."""
    sizes = []
    for found in COMMAND.finditer(text):
        words = shlex.split(found.group(0))
        sizes.append(int(words[words.index("--tp-size") + 1]) if "--tp-size" in words else 0)
    return sizes


def test_box_and_box_plan_print_the_layout_s_tp_size(tmp_path):
    """`verifylab box` on a 2-GPU probe prints TP 2; `box --plan --tp 8` prints TP 8."""
    runner = CliRunner()
    common = ["--data-dir", str(ROOT / "data"), "--config", str(QWEN), "--accept", "2.4"]
    probe = "20261201-092338-2xh200-probe-p2p"
    box = runner.invoke(app, ["box", "--probe", probe, "--decode-tok-s", "90", "--out", str(tmp_path), *common])
    assert box.exit_code == 0, box.output
    assert _tp_sizes(box.output) == [2]
    plan = runner.invoke(
        app, ["box", "--plan", "--tp", "8", "--regime", "healthy P2P", "--gpu", "h100", "--load", "16", *common]
    )
    assert plan.exit_code == 0, plan.output
    assert _tp_sizes(plan.output) == [8]


def test_chapter_5_prints_its_tp_size_with_its_launcher(shipped):
    """Chapter 5's command carries its ``tp_size`` and starts SGLang with its ``launcher``."""
    from verifylab.analysis.recommendation import Topic
    from verifylab.chapters.ch05_recommendations import Params, _recommendations

    params = Params(tp_size=8, launcher=["/opt/box/bin/python", "-m", "sglang.launch_server"])
    command = next(r.command for r in _recommendations(shipped, params) if r.topic is Topic.LAUNCH_COMMAND)
    words = shlex.split(command)
    assert words[words.index("--tp-size") + 1] == "8" and "/opt/box/bin/python" in words


@pytest.mark.slow  # reads the built book: make test
def test_every_command_the_book_prints_carries_its_tp_size(built_book):
    """Every command a chapter or the decision page prints (a run page quotes its stored notes as recorded)."""
    pages = [p for p in built_book.rglob("*.html") if "runs" not in p.relative_to(built_book).parts]
    texts = [re.sub(r"<[^>]+>", "", p.read_text(encoding="utf-8")).replace("\\\n", " ") for p in pages]
    sizes = [s for text in texts for s in _tp_sizes(text)]
    assert sizes and 0 not in sizes
