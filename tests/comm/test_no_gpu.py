"""Without a GPU, ``comm probe`` says so before importing torch or the run store (seconds of imports on a small
machine): it reads the device nodes and CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from verifylab.comm.probe import no_gpu_reason


def test_no_gpu_reason_reads_device_nodes_and_the_visible_devices(tmp_path):
    assert "no NVIDIA GPU device" in no_gpu_reason(tmp_path, env={})
    (tmp_path / "nvidiactl").touch()  # the control node alone is no GPU
    assert no_gpu_reason(tmp_path, env={}) is not None
    (tmp_path / "nvidia0").touch()
    assert no_gpu_reason(tmp_path, env={}) is None
    assert "hides every GPU" in no_gpu_reason(tmp_path, env={"CUDA_VISIBLE_DEVICES": ""})
    assert "hides every GPU" in no_gpu_reason(tmp_path, env={"CUDA_VISIBLE_DEVICES": "-1"})
    assert no_gpu_reason(tmp_path, env={"CUDA_VISIBLE_DEVICES": "0"}) is None


def test_probe_without_gpus_answers_before_importing_torch_or_pandas():
    code = (
        "import sys, json\n"
        "from typer.testing import CliRunner\n"
        "from verifylab.cli import app\n"
        "r = CliRunner().invoke(app, ['comm', 'probe', '--no-store'])\n"
        "print(json.dumps({'code': r.exit_code, 'out': r.output, "
        "'heavy': sorted(m for m in ('torch', 'pandas') if m in sys.modules)}))\n"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] != 0 and "CUDA_VISIBLE_DEVICES='' hides every GPU" in result["out"]
    assert result["heavy"] == []
