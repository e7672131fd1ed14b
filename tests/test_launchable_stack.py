"""#68: the stack an owner can launch today — SGLang 0.5.22 with FlashInfer 0.7.1 and its PCIe-IPC all-reduce where P2P
works, the case study's 0.5.9 stack for a box that cannot upgrade — each command built by the one builder and
checked against the audited wheel's committed flags and the environment variables it reads."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pandas as pd
import pytest

from verifylab.chapters.ch05_recommendations import case_study_command
from verifylab.gates.sglang_env import env_in_source
from verifylab.launch import PCIE_IPC_ENV, AllReduce, LaunchError, SglangLaunch, build_command
from verifylab.model.inputs.stored import stored_inputs
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


NEEDS_P2P = ("FlashInfer", "PCIe-IPC")  # options whose kernels write into the peers' memory


def test_no_option_that_needs_p2p_is_offered_where_p2p_is_broken(ev):
    """Every regime x option: where P2P is broken (the case study's as-reported regime) or absent (host memory),
    fusion and the PCIe-IPC all-reduce are not priced, and no 'fastest' names them."""
    from verifylab.model.answers.decision import decision_table
    from verifylab.model.case.whatif import options_at_loads
    from verifylab.model.pricing.regimes import REGIME_TITLE
    from verifylab.vocab import Regime

    frame = options_at_loads(stored_inputs(ev), (1, 8, 32))
    for regime in (Regime.DEGRADED, Regime.HOST_MEMORY):
        rows = frame[(frame["regime"] == REGIME_TITLE[regime]) & frame["option"].str.contains("|".join(NEEDS_P2P))]
        assert not rows.empty
        assert rows["verify (ms)"].isna().all() or (rows["not priced because"].str.contains("P2P")).all(), rows
    table = decision_table(ev).set_index("regime_key")
    for regime in (Regime.DEGRADED, Regime.HOST_MEMORY):
        row = table.loc[regime.value]
        assert not any(word in row["fastest_at"] for word in NEEDS_P2P), row["fastest_at"]
        assert str(row["pcie_ipc_eagle3_tok_s"]).startswith("cannot run")


def test_nccl_slow_while_p2p_works_keeps_what_writes_into_peers():
    """A probe whose P2P works and whose NCCL is slow: the policy allows fusion and the custom all-reduce (they need
    P2P, which works), and the box's own collectives other than NCCL are priced as healthy P2P's."""
    from verifylab.comm.policy import policy_from_probe
    from verifylab.vocab import Regime

    verdicts = pd.DataFrame([{"scope": "all", "regime": Regime.NCCL_SLOW.value, "world": 8, "refused_paths": ""}])
    latency = pd.DataFrame([{"impl": "fused", "correct": True, "group": "all"}])
    policy = policy_from_probe("r", verdicts, latency, {})
    assert policy.tensor_parallel and policy.custom_allreduce and policy.fusion_allowed
