"""Issue 53 classes 6 and 8 (formula injection, unquoted commands): what leaves the book for a spreadsheet or a shell
goes through one boundary each. At dc55d9b a label or public row starting with ``=``, ``+``, ``-`` or ``@`` reached
the exported CSVs as a formula, and the printed launch command put a model path with ``; rm -rf ~`` in it unquoted.
Boundaries: ``verifylab.csv_cells`` (every exported CSV) and ``verifylab.command_line`` (every printed
command)."""

from __future__ import annotations

import io
import shlex

import pandas as pd
import pytest

from verifylab.comm.policy import Policy
from verifylab.command_line import shell_command
from verifylab.csv_cells import csv_text, neutral_cell
from verifylab.launch import LaunchTarget, SglangLaunch, build_command
from verifylab.model.answers.box_decision import BoxInputs, box_launch
from verifylab.model.answers.engine_answer import choice_for

FORMULAS = ['=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\r=1"]


@pytest.mark.parametrize("cell", FORMULAS)
def test_a_cell_that_starts_a_formula_leaves_as_text(cell):
    text = csv_text(pd.DataFrame({"label": [cell], "value": [1.5]}))
    read = pd.read_csv(io.StringIO(text), keep_default_na=False)
    assert str(read.loc[0, "label"]).startswith("'")
    assert read.loc[0, "value"] == 1.5


def test_numbers_stay_numbers_and_column_names_are_neutral_too():
    assert neutral_cell("-3.5") == "-3.5" and neutral_cell(-3.5) == -3.5 and neutral_cell("+2e3") == "+2e3"
    text = csv_text(pd.DataFrame({"=cmd": ["ok"], "n": [-1]}))
    assert text.splitlines()[0] == "'=cmd,n" and text.splitlines()[1] == "ok,-1"


def test_every_export_writer_goes_through_the_boundary():
    from pathlib import Path

    source = (Path(__file__).resolve().parents[2] / "src" / "verifylab" / "publish" / "exports.py").read_text()
    assert ".to_csv(" not in source and source.count("csv_text(") >= 3


HOSTILE_PATH = "/models/My Model; rm -rf ~"


def _every_flag() -> list[str]:
    extras = (f.json_schema_extra for f in SglangLaunch.model_fields.values())
    return [str(e["flag"]) for e in extras if isinstance(e, dict)]


def test_a_printed_command_keeps_a_hostile_path_one_argument():
    line = shell_command(["python", "-m", "sglang.launch_server", "--model-path", HOSTILE_PATH], unset=["NCCL_X"])
    assert shlex.split(line)[-1] == HOSTILE_PATH and shlex.split(line)[:3] == ["env", "-u", "NCCL_X"]


def test_the_box_launch_command_is_quoted():
    policy = Policy(
        run_id="r", regime="healthy P2P", world=2, tensor_parallel=True, fusion_allowed=False,
        custom_allreduce=True, sglang_flags=[], unset=["NCCL_P2P_DISABLE"], reasons=[],
    )  # fmt: skip
    choice = choice_for("sglang", None, None, None, {}, "h200", None)  # SGLang's default backend, KV bf16
    launch = box_launch(BoxInputs("r", 50.0, "given", 2.0, model_path=HOSTILE_PATH), policy, False, True, choice, {})
    line = build_command(launch, LaunchTarget("any SGLang", frozenset(_every_flag()))).shell()
    args = shlex.split(line)
    assert HOSTILE_PATH in args and "rm" not in args
    assert args[args.index("--speculative-num-draft-tokens") + 1] == "4"
