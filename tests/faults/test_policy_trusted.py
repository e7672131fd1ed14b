"""Issue 53 class 5 (trusted without a check), the policy's side: at dc55d9b `serve --policy` obeyed a tampered
``policy.json`` (fusion allowed on a host-memory box, ``tp_size`` from a one-GPU probe, another box's policy, wrong
types). The boundary: ``comm.policy.trusted_policy``: the stored policy is used only when it is what the probe's
own tables imply."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

ROOT = Path(__file__).resolve().parents[2]
SHM, P2P = "20261201-091704-2xh200-probe-shm", "20261201-092338-2xh200-probe-p2p"


def _store(tmp_path: Path, run: str = SHM) -> Path:
    (tmp_path / "data" / "runs").mkdir(parents=True)
    shutil.copytree(ROOT / "data" / "runs" / run, tmp_path / "data" / "runs" / run)
    return tmp_path / "data" / "runs" / run / "policy.json"


def _serve(tmp_path: Path, variant: str = "fusion", run: str = SHM):
    args = ["serve", variant, "--model-path", "/m", "--launcher", f"touch {tmp_path / 'started'}"]
    args += ["--data-dir", str(tmp_path / "data"), "--policy", run, "--log-dir", str(tmp_path)]
    return CliRunner().invoke(app, args)


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ({"fusion_allowed": True}, "fusion_allowed differ"),  # fusion on a host-memory box
        ({"world": 8}, "world differ"),
        ({"world": "2"}, "'world' is '2', not a int"),
        ({"unset": []}, "unset differ"),  # PATH-like tampering with what is removed
    ],
)
def test_an_edited_policy_is_refused_before_anything_starts(tmp_path, edit, named):
    path = _store(tmp_path)
    policy = json.loads(path.read_text())
    path.write_text(json.dumps({**policy, **edit}))
    result = _serve(tmp_path, "baseline")
    assert result.exit_code == 1 and named in result.output, result.output
    assert not (tmp_path / "started").exists()


def test_another_boxs_policy_is_refused(tmp_path):
    path = _store(tmp_path)
    other = json.loads((ROOT / "data" / "runs" / P2P / "policy.json").read_text())
    path.write_text(json.dumps(other))
    result = _serve(tmp_path, "baseline")
    assert result.exit_code == 1 and f"the policy of run '{P2P}'" in result.output


def test_an_untouched_policy_still_decides(tmp_path):
    _store(tmp_path)
    result = _serve(tmp_path, "fusion")
    assert result.exit_code == 1 and "rules out all-reduce fusion" in result.output
