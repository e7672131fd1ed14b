"""`verifylab serve --policy RUN`: a probe's policy.json decides what may launch (#40 item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.comm.policy import read_policy
from verifylab.launch import NO_CUSTOM_ALLREDUCE
from verifylab.server.launch import server_environment
from verifylab.server.policy import PolicyRefusal, apply_policy
from verifylab.server.variants import DEFAULT_VARIANTS, BaseConfig

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
SHM, P2P, ONE = (
    "20261201-091704-2xh200-probe-shm",
    "20261201-092338-2xh200-probe-p2p",
    "20261202-202959-h200-probe-1gpu",
)


def _base(**kw) -> BaseConfig:
    return BaseConfig(model_path="/m", launcher=["false"], **kw)


def test_host_memory_policy_sets_its_flags_and_unsets_what_the_probe_ran_with():
    policy = read_policy(RUNS / SHM)
    base = apply_policy(policy, _base(), DEFAULT_VARIANTS["baseline"], None)
    assert base.tp_size == 2 and base.disable_custom_all_reduce and base.unset_env == ["NCCL_P2P_DISABLE"]
    env = server_environment({"NCCL_P2P_DISABLE": "1", "PATH": "/bin"}, set(base.unset_env))
    assert env == {"PATH": "/bin"}
    with pytest.raises(PolicyRefusal, match=r"rules out all-reduce fusion.*host-memory"):
        apply_policy(policy, _base(), DEFAULT_VARIANTS["fusion"], None)


def test_healthy_policy_keeps_custom_allreduce_and_refuses_more_gpus_than_probed():
    policy = read_policy(RUNS / P2P)
    base = apply_policy(policy, _base(), DEFAULT_VARIANTS["eagle3"], None)
    assert base.tp_size == 2 and not base.disable_custom_all_reduce and base.unset_env == []
    with pytest.raises(PolicyRefusal, match="measured 2 GPU"):
        apply_policy(policy, _base(), DEFAULT_VARIANTS["baseline"], 8)
    # the fused kernel was not checked in that probe: fusion is refused with the probe's own reason
    with pytest.raises(PolicyRefusal, match="not checked correct"):
        apply_policy(policy, _base(), DEFAULT_VARIANTS["eagle3_fusion"], None)


def test_one_gpu_policy_refuses_tensor_parallelism():
    policy = read_policy(RUNS / ONE)
    assert apply_policy(policy, _base(), DEFAULT_VARIANTS["baseline"], None).tp_size == 1
    with pytest.raises(PolicyRefusal, match="rules out tensor parallelism"):
        apply_policy(policy, _base(), DEFAULT_VARIANTS["baseline"], 2)


def test_serve_refuses_before_starting_anything(tmp_path):
    marker = tmp_path / "started"
    launcher = f"touch {marker}"
    args = ["serve", "fusion", "--model-path", "/m", "--launcher", launcher, "--data-dir", str(RUNS.parent)]
    result = CliRunner().invoke(app, [*args, "--policy", SHM, "--log-dir", str(tmp_path)])
    assert result.exit_code == 1 and "rules out all-reduce fusion" in result.output
    assert not marker.exists()
    missing = CliRunner().invoke(app, [*args, "--policy", "no-such-run", "--log-dir", str(tmp_path)])
    assert missing.exit_code == 1 and "not found" in missing.output


def test_chapter_05_reads_the_same_policy_every_probe_wrote():
    from verifylab.analysis.probe_policies import stored_policies
    from verifylab.store.evidence import Evidence

    policies = stored_policies(Evidence(RUNS.parent).measured)
    assert {SHM, P2P, ONE} <= {p.run_id for p in policies}
    for policy in policies:
        assert policy == read_policy(RUNS / policy.run_id)


def test_a_launch_command_is_checked_against_the_probes_policy():
    from verifylab.analysis.probe_policies import command_breaks_policy
    from verifylab.chapters import ch05_recommendations as chapter
    from verifylab.store.evidence import Evidence

    shm = read_policy(RUNS / SHM)
    fused = "python -m sglang.launch_server --tp-size 2 --enable-flashinfer-allreduce-fusion"
    broken = command_breaks_policy(fused, shm)
    assert any("fusion is ruled out" in b for b in broken) and any(NO_CUSTOM_ALLREDUCE in b for b in broken)
    assert command_breaks_policy(f"x --tp-size 2 {NO_CUSTOM_ALLREDUCE}", shm) == []
    ev = Evidence(RUNS.parent)
    checked = chapter.policy_check(ev, chapter.Params(probe_run=ONE, mode="replay"))
    assert "breaks the policy" in checked and "tensor parallelism is ruled out" in checked  # TP 8 on one GPU
    assert "not checked" in chapter.policy_check(ev, chapter.Params(mode="replay"))
    assert len(chapter.probe_policies(ev).frame) == len(stored_policy_ids(ev))


def stored_policy_ids(ev):
    return [
        r for r in ev.measured.runs_with_all(("verdict", "allreduce_latency")) if not ev.measured.run(r).mechanics_only
    ]
