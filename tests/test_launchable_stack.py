"""#68: the stack an owner can launch today — SGLang 0.5.22 with FlashInfer 0.7.1 and its PCIe-IPC all-reduce where P2P
works, the case study's 0.5.9 stack for a box that cannot upgrade — each command built by the one builder and
checked against the audited wheel's committed flags and the environment variables it reads."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from verifylab.chapters.ch05_recommendations import case_study_command
from verifylab.gates.sglang_env import env_in_source
from verifylab.launch import PCIE_IPC_ENV, AllReduce, LaunchError, SglangLaunch, build_command
from verifylab.publish.decision import launch_section
from verifylab.store.evidence import Evidence
from verifylab.vocab import CASE_STUDY_STACK, RECOMMENDED_STACK

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ev() -> Evidence:
    return Evidence(ROOT / "data")


def _commands(markdown: str) -> list[str]:
    return [" ".join(block.replace("\\\n", " ").split()) for block in re.findall(r"```bash\n(.*?)```", markdown, re.S)]


def test_the_committed_env_table_says_which_wheel_reads_the_pcie_ipc_switch(ev):
    assert PCIE_IPC_ENV in ev.sglang_env[RECOMMENDED_STACK[0]]
    assert PCIE_IPC_ENV not in ev.sglang_env["0.5.20"]  # 0.5.20 has no PCIe-IPC all-reduce


def test_a_variable_the_target_wheel_does_not_read_is_refused(ev):
    launch = SglangLaunch(model_path="m", tp_size=8, allreduce=AllReduce.PCIE_IPC)
    older = ev.launch_target("0.5.20")
    with pytest.raises(LaunchError, match=PCIE_IPC_ENV):
        build_command(launch.model_copy(update={"env": {PCIE_IPC_ENV: "1"}}), older)


def test_the_decision_page_launches_the_recommended_stack_and_the_case_studys(ev):
    recommended, case = _commands(launch_section(ev))
    assert recommended.startswith(f"{PCIE_IPC_ENV}=1 ") and "--tp-size 8" in recommended
    assert PCIE_IPC_ENV not in case and "--tp-size 8" in case
    for command, version in ((recommended, RECOMMENDED_STACK[0]), (case, CASE_STUDY_STACK[0])):
        flags = {w for w in shlex.split(command) if w.startswith("--")}
        assert flags <= ev.sglang_flags[version], (version, flags - ev.sglang_flags[version])
        variables = {w.split("=")[0] for w in shlex.split(command) if re.match(r"^[A-Z_]+=", w)}
        assert variables <= ev.sglang_env[version]


def test_chapter_5_prints_the_case_studys_command(ev, capsys):
    case_study_command(ev)
    out = capsys.readouterr().out
    assert f"SGLang {CASE_STUDY_STACK[0]} with FlashInfer {CASE_STUDY_STACK[1]}" in out and "--tp-size 8" in out


def test_the_env_scan_reads_what_a_source_reads_and_declares():
    source = (
        "import os\n"
        "A = os.environ.get('SGLANG_A')\n"
        "B = os.getenv('SGLANG_B', '0')\n"
        "C = os.environ['NCCL_C']\n"
        "D = get_bool_env_var('SGLANG_D')\n"
        "E = os.environ.get('HOME')\n"  # not a family a launch sets
        "class Envs:\n"
        "    SGLANG_F = EnvBool(False)\n"
    )
    assert env_in_source(source, "sglang/srt/environ.py") == {"SGLANG_A", "SGLANG_B", "NCCL_C", "SGLANG_D", "SGLANG_F"}
