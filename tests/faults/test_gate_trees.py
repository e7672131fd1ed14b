"""Issue 41 class 3 at the tree boundary (``gates.tree``): a tree with a gate file missing, a FIFO or a folder
named like a source, or a link out of ``--root`` is refused by audit, apply and verify before anything is judged
or written."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

GATED = "sglang/srt/layers/communicator.py"


def _tree(tmp_path):
    root = tmp_path / "site-packages"
    (root / "sglang/srt/layers").mkdir(parents=True)
    (root / "sglang/__init__.py").write_text('__version__ = "0.5.9"\n')
    (root / "sglang/srt/server_args.py").write_text("x = 1\n")
    (root / GATED).write_text("def f():\n    return 1\n")
    matrix = tmp_path / "gate_matrix.csv"
    matrix.write_text(
        "package,version,file,function,line,kind,status,expression,note,provenance\n"
        f"sglang,0.5.9,{GATED},f,1,boolean_gate,closed,is_sm100(),,audited\n"
    )
    return root, matrix


def _break(root, how, outside):
    path = root / GATED
    path.unlink()
    if how == "fifo":
        os.mkfifo(path)
    elif how == "folder":
        path.mkdir()
    elif how == "link":
        path.symlink_to(outside)


@pytest.mark.parametrize(
    ("how", "words"),
    [("missing", "no such Python source"), ("fifo", "a FIFO"), ("folder", "a directory"), ("link", "out of")],
)
@pytest.mark.parametrize("command", ["audit", "apply", "verify"])
def test_a_tree_that_is_not_whole_is_refused(tmp_path, how, words, command):
    root, matrix = _tree(tmp_path)
    outside = tmp_path / "outside.py"
    outside.write_text("def f():\n    return 1\n")
    _break(root, how, outside)
    result = CliRunner().invoke(app, ["gates", command, "--root", str(root), "--matrix", str(matrix)])
    assert result.exit_code == 1 and words in result.output, result.output
    assert "nothing was changed" in result.output
    assert outside.read_text() == "def f():\n    return 1\n" and not (root / ".verifylab-gates").exists()


def test_a_whole_tree_is_audited(tmp_path):
    root, matrix = _tree(tmp_path)
    result = CliRunner().invoke(app, ["gates", "audit", "--root", str(root), "--matrix", str(matrix), "--json"])
    assert result.exit_code == 0, result.output
