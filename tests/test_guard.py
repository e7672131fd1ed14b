"""The multicast guard: every process with ``guarded_env`` has multicast off and cannot create a multicast object."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from verifylab.guard import NO_MULTICAST_ENV, SITE_DIR, guarded_env

FAKE_DRIVER = """
import enum
class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NOT_SUPPORTED = 801
class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED = 132
    CU_DEVICE_ATTRIBUTE_OTHER = 1
def cuMulticastCreate(prop): return (CUresult.CUDA_SUCCESS, "a multicast handle")
def cuMulticastGetGranularity(prop, flags): return (CUresult.CUDA_SUCCESS, 2097152)
def cuDeviceGetAttribute(attrib, dev): return (CUresult.CUDA_SUCCESS, 1)
"""

PROBE = """
from cuda.bindings import driver as d
from cuda.bindings.driver import cuMulticastGetGranularity
A = d.CUdevice_attribute
multicast = d.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 0)[1]
print(cuMulticastGetGranularity(None, 0)[0].name, multicast, d.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_OTHER, 0)[1])
try:
    d.cuMulticastCreate(None)
    print("created")
except RuntimeError as exc:
    print(type(exc).__name__)
"""


def fake_cuda(tmp_path: Path) -> Path:
    pkg = tmp_path / "cuda" / "bindings"
    pkg.mkdir(parents=True)
    (tmp_path / "cuda" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "driver.py").write_text(FAKE_DRIVER)
    return tmp_path


def run_probe(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)


def test_guarded_env_turns_multicast_off_and_blocks_multicast_objects(tmp_path):
    env = guarded_env({**os.environ, "PYTHONPATH": str(fake_cuda(tmp_path))})
    assert {k: env[k] for k in NO_MULTICAST_ENV} == NO_MULTICAST_ENV
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(SITE_DIR)
    out = run_probe(env)
    assert out.stdout.split() == ["CUDA_SUCCESS", "1", "1", "MulticastForbidden"], out.stderr
    assert "verifylab multicast guard loaded" in out.stderr  # the server logs show it


def test_simulated_pcie_box_answers_like_one_without_multicast(tmp_path):
    env = guarded_env({**os.environ, "PYTHONPATH": str(fake_cuda(tmp_path))}, simulate_no_multicast=True)
    out = run_probe(env)
    # the granularity query fails, the attribute reads 0, other attributes are untouched, creation still raises
    assert out.stdout.split() == ["CUDA_ERROR_NOT_SUPPORTED", "0", "1", "MulticastForbidden"], out.stderr
    assert "simulating a box without NVLink multicast" in out.stderr


def test_without_the_guard_the_fake_driver_would_create_one(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(fake_cuda(tmp_path))}
    assert run_probe(env).stdout.split()[-1] == "created"  # so the tests above can fail
