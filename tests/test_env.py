import json
import re

from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.host import capture_host, interconnect_from_topology
from verifylab.redact import measurement_environment

TOPO_NVLINK = """\
        GPU0    GPU1    CPU Affinity
GPU0     X      NV18    0-31
GPU1    NV18     X      0-31
"""
TOPO_PCIE = """\
        GPU0    GPU1    GPU2    CPU Affinity
GPU0     X      PIX     SYS     0-31
GPU1    PIX      X      SYS     0-31
GPU2    SYS     SYS      X      32-63
"""


def test_redaction_hides_secret_values_and_keeps_relevant_ones():
    env = {
        "HF_TOKEN": "hf_abc",
        "MY_API_KEY": "k",
        "DB_PASSWORD": "p",
        "NCCL_P2P_DISABLE": "1",
        "HOME": "/root",
    }
    kept = measurement_environment(env)
    assert kept == {"NCCL_P2P_DISABLE": "1"}  # only what matters to a measurement: no secret, not even its name


def test_topology_summary():
    assert interconnect_from_topology(TOPO_NVLINK) == "NVLink"
    assert interconnect_from_topology(TOPO_PCIE) == "PCIe"
    assert interconnect_from_topology("        GPU0    CPU\nGPU0     X      0-7\n") == "single GPU"


def test_env_json_without_gpu_reports_manifest_fields_and_redacts(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_supersecret")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvidia-smi, no nvcc
    result = CliRunner().invoke(app, ["env", "--json", "--no-torch"])
    assert result.exit_code == 0, result.output
    assert "hf_supersecret" not in result.output
    data = json.loads(result.output)
    for field in (
        "host",
        "gpu_name",
        "compute_capability",
        "gpu_count",
        "interconnect",
        "driver",
        "cuda",
        "versions",
        "git_commit",
    ):
        assert field in data
    assert data["gpu_count"] == 0
    assert data["interconnect"] == "none (no GPU)"
    assert any("no NVIDIA GPU" in note for note in data["notes"])
    assert "HF_TOKEN" not in data["environment"]  # not a measurement setting: not recorded
    assert data["environment"]["NCCL_DEBUG"] == "INFO"


def test_capture_host_records_versions():
    info = capture_host(with_torch=False)
    assert info.versions["verifylab"] is not None
    assert info.python.count(".") == 2


def test_env_table_reads_as_words_not_json(monkeypatch):
    """The table printed the package versions as JSON, with `null` for a package not installed, while its other rows
    said "—": a package reads "name version", a missing one "name —", and no row holds null, None or a bracket."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    result = CliRunner().invoke(app, ["env", "--no-torch"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "versions" in line)
    assert re.search(r"verifylab \d", row) and "{" not in row and "null" not in row and "None" not in row, row
    notes = [line for line in result.output.splitlines() if "notes" in line]
    assert all("[" not in line for line in notes), notes
