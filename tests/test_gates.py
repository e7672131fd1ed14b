"""Gates against the real published wheels (downloaded once into .cache/, git-ignored)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import verifylab.gates as gates
import verifylab.gates.opening as opening
import verifylab.gates.scan as scan
from verifylab.cli import app
from verifylab.errors import GateError
from verifylab.gates.matrix import download_wheel, unpack_sources
from verifylab.gates.prefilter import may_hold_gates

CACHE = Path(__file__).resolve().parents[1] / ".cache"
pytestmark = pytest.mark.slow

# Exactly the (file, function) pairs `apply` may change, per version.
EXPECTED_CHANGES = {
    ("sglang", "0.5.8"): {
        ("sglang/srt/server_args.py", "_handle_model_specific_adjustments"),
        ("sglang/srt/layers/communicator.py", "apply_flashinfer_allreduce_fusion"),
        (
            "sglang/srt/distributed/device_communicators/torch_symm_mem.py",
            "TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM",
        ),
        ("sglang/srt/distributed/device_communicators/all_reduce_utils.py", "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"),
    },
    ("sglang", "0.5.23"): {
        ("sglang/srt/arg_groups/overrides.py", "_flashinfer_allreduce_fusion_auto_enable"),
        ("sglang/srt/layers/flashinfer_comm_fusion.py", "_resolve_backend"),
        ("sglang/srt/layers/layer_boundary/residual/add_norm.py", "flashinfer_ar_fusion_applies"),
        (
            "sglang/srt/distributed/device_communicators/torch_symm_mem.py",
            "TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM",
        ),
        ("sglang/srt/distributed/device_communicators/all_reduce_utils.py", "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"),
    },
    ("flashinfer", "0.6.4"): {("flashinfer/jit/comm.py", "gen_trtllm_comm_module")},
}
EXPECTED_CHANGES[("sglang", "0.5.9")] = EXPECTED_CHANGES[("sglang", "0.5.8")]


def pristine(package: str, version: str) -> Path:
    wheel = download_wheel(package, version, CACHE / "wheels")
    return unpack_sources(wheel, package, CACHE / "unpacked" / f"{package}-{version}")


def tree_digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture()
def copy_of(tmp_path):
    def make(package: str, version: str) -> Path:
        target = tmp_path / f"{package}-{version}"
        shutil.copytree(pristine(package, version), target)
        return target

    return make


@pytest.mark.parametrize(("package", "version"), sorted(EXPECTED_CHANGES))
def test_audit_apply_verify_reapply_revert(copy_of, package, version):
    root = copy_of(package, version)
    before = tree_digest(root)
    audit = gates.audit(root, "sm120")
    closed = {f.key() for f in audit.closed}
    assert closed == EXPECTED_CHANGES[(package, version)]
    if package == "sglang":
        limits = [f for f in audit.findings if f.kind == "limit"]
        assert limits and "2048" in limits[0].expression
    result = gates.apply(root, "sm120")
    assert set(result.changed) == {file for file, _ in EXPECTED_CHANGES[(package, version)]}
    changed_files = {
        rel
        for rel, digest in tree_digest(root).items()
        if before.get(rel) != digest and not rel.startswith(".verifylab-gates")
    }
    assert changed_files == set(result.changed)  # nothing outside the fusion / symm-mem paths
    report = gates.verify(root, "sm120")
    assert report.ok, [c for c in report.checks if not c["ok"]]
    assert gates.audit(root, "sm120").closed == []
    assert gates.apply(root, "sm120").changed == []  # applying twice changes nothing
    gates.revert(root)
    assert tree_digest(root) == before  # byte-identical to the wheel's files


def test_false_friends_are_not_gates(copy_of):
    findings = gates.audit(copy_of("sglang", "0.5.23")).findings
    assert "_resolve_backend" in {f.function for f in findings}
    files = {f.file for f in findings}
    assert "sglang/srt/distributed/bootstrap.py" not in files  # the unrelated _resolve_backend
    assert not any("fp8_utils" in f or "model_overrides" in f or "attention_hook" in f for f in files)


@pytest.mark.parametrize(("package", "version"), [("sglang", "0.5.9"), ("flashinfer", "0.6.4")])
def test_what_the_scan_skips_unparsed_holds_no_finding(monkeypatch, package, version):
    """The scan parses the few files that hold a finding's text (5 of SGLang 0.5.9's); the unpacked tree holds
    every file that mentions any gate token (25) and the ``__init__`` files: parsing all of those finds the same."""
    root = pristine(package, version)  # read only
    skipped = audit_to_dicts(gates.audit(root, "sm120"))
    monkeypatch.setattr(scan, "worth_parsing", may_hold_gates)  # what scan_file calls
    assert audit_to_dicts(gates.audit(root, "sm120")) == skipped


def audit_to_dicts(audit) -> list[dict]:
    return [f.to_dict() for f in audit.findings]


def test_auto_enable_lists_kimi_in_0_5_9(copy_of):
    root = copy_of("sglang", "0.5.9")
    notes = " ".join(f.note for f in gates.audit(root).findings)
    assert "KimiK25ForConditionalGeneration" in notes


def test_dry_run_changes_nothing(copy_of):
    root = copy_of("sglang", "0.5.9")
    before = tree_digest(root)
    result = gates.apply(root, "sm120", dry_run=True)
    assert "+            and (is_sm90_supported() or is_sm100_supported() or is_sm120_supported())" in result.diff
    assert tree_digest(root) == before


def test_file_edited_after_audit_is_refused(copy_of):
    root = copy_of("sglang", "0.5.9")
    audit = gates.audit(root)
    target = root / "sglang/srt/layers/communicator.py"
    target.write_text(target.read_text() + "\n# local edit\n")
    before = tree_digest(root)
    with pytest.raises(GateError, match=r"communicator\.py changed since the audit"):
        gates.apply(root, expected=audit.hashes)
    assert tree_digest(root) == before


def test_failure_between_two_writes_leaves_nothing_half_applied(copy_of, monkeypatch):
    root = copy_of("sglang", "0.5.9")
    before = tree_digest(root)
    real = opening._write_file
    calls = {"n": 0}

    def flaky(path, data):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full (injected)")
        real(path, data)

    monkeypatch.setattr(opening, "_write_file", flaky)
    with pytest.raises(GateError, match=r"1 already written were restored: nothing is applied"):
        gates.apply(root)
    assert tree_digest(root) == before


def test_read_only_root_is_refused(copy_of, monkeypatch):
    root = copy_of("sglang", "0.5.9")
    before = tree_digest(root)
    if os.geteuid() != 0:
        for path in root.rglob("*"):
            path.chmod(0o555 if path.is_dir() else 0o444)
    else:  # root ignores permission bits: emulate a read-only mount (statvfs ST_RDONLY)
        monkeypatch.setattr(opening, "writable", lambda path: False)
    try:
        with pytest.raises(GateError, match=r"not writable \(read-only install\?\): nothing was changed"):
            gates.apply(root)
    finally:
        for path in root.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
    assert tree_digest(root) == before


def test_dir_without_sglang(tmp_path):
    with pytest.raises(GateError, match="holds neither sglang/ nor flashinfer/"):
        gates.audit(tmp_path)
    with pytest.raises(GateError, match="no such folder"):
        gates.audit(tmp_path / "missing")


def test_non_python_file_in_the_way(copy_of):
    root = copy_of("sglang", "0.5.9")
    before = tree_digest(root)
    bad = root / "sglang/srt/layers/is_sm_junk.py"
    bad.write_bytes(b"\x89PNG is_sm100 \x00\xff binary")
    with pytest.raises(GateError, match=r"is_sm_junk\.py: not a readable Python source"):
        gates.apply(root)
    bad.unlink()
    (root / gates.STATE_DIR).write_text("not a folder")
    with pytest.raises(GateError, match=r"\.verifylab-gates exists and is not a folder"):
        gates.apply(root)
    (root / gates.STATE_DIR).unlink()
    assert tree_digest(root) == before


def test_revert_refuses_when_a_patched_file_changed(copy_of):
    root = copy_of("sglang", "0.5.9")
    gates.apply(root)
    target = root / "sglang/srt/server_args.py"
    target.write_text(target.read_text() + "\n")
    with pytest.raises(GateError, match=r"server_args\.py changed after apply"):
        gates.revert(root)


def test_cli_audit_json_apply_verify_revert(copy_of):
    root = copy_of("flashinfer", "0.6.4")
    runner = CliRunner()
    audit = runner.invoke(app, ["gates", "audit", "--root", str(root), "--json"])
    assert audit.exit_code == 0, audit.output
    data = json.loads(audit.output)
    assert data["versions"]["flashinfer"] == "0.6.4"
    assert any(f["kind"] == "jit_arch_list" and f["status"] == "closed" for f in data["findings"])
    assert any(f["kind"] == "precondition" and "experimental" in f["note"] for f in data["findings"])
    saved = root.parent / "audit.json"
    saved.write_text(audit.output)
    applied = runner.invoke(app, ["gates", "apply", "--root", str(root), "--audit", str(saved)])
    assert applied.exit_code == 0, applied.output
    assert "supported_major_versions=[9, 10, 12]" in (root / "flashinfer/jit/comm.py").read_text()
    assert runner.invoke(app, ["gates", "verify", "--root", str(root)]).exit_code == 0
    assert runner.invoke(app, ["gates", "revert", "--root", str(root)]).exit_code == 0
    missing = runner.invoke(app, ["gates", "audit", "--root", str(root.parent / "nope")])
    assert missing.exit_code == 1 and "no such folder" in missing.output


@pytest.mark.parametrize("command", ["audit", "apply", "verify", "revert", "matrix"])
def test_every_gates_command_has_help_with_an_example(command):
    result = CliRunner().invoke(app, ["gates", command, "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output


def with_flashinfer_metadata(root: Path, version: str) -> Path:
    """The site-packages view the audit reads FlashInfer's version from (its dist-info), beside SGLang's sources."""
    meta = root / f"flashinfer_python-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: flashinfer-python\nVersion: {version}\n")
    return root


def preflight(audit) -> list:
    return [f for f in audit.findings if f.role == "multicast preflight"]


def test_multicast_preflight_gate_opens_only_where_flashinfer_needs_no_multicast(copy_of):
    """SGLang 0.5.17's workspace preflight skips fusion when the multicast granularity query fails (a PCIe box).
    Where the installed FlashInfer allocates its workspace without multicast (all audited versions but
    0.6.11-0.6.12) verifylab opens it; with one that needs multicast it says why not."""
    root = copy_of("sglang", "0.5.17")
    (alone,) = preflight(gates.audit(root, "sm90"))
    assert alone.status == "info" and "no FlashInfer in this tree" in alone.note
    old = with_flashinfer_metadata(root, "0.6.11.post1")
    (needs,) = preflight(gates.audit(old, "sm90"))
    assert needs.status == "info" and "needs NVLink multicast" in needs.note
    assert gates.apply(old, "sm90", dry_run=True).changed == []
    shutil.rmtree(old / "flashinfer_python-0.6.11.post1.dist-info")

    root = with_flashinfer_metadata(root, "0.6.15.post1")
    before = tree_digest(root)
    (closed,) = preflight(gates.audit(root, "sm90"))
    assert (closed.status, closed.function) == ("closed", "_flashinfer_trtllm_workspace_allocation_sizes")
    result = gates.apply(root, "sm90")  # on SM90 the architecture gates are open: only the preflight changes
    assert result.changed == ["sglang/srt/layers/flashinfer_comm_fusion.py"]
    assert "err, mc_granularity = cuda_driver.CUresult.CUDA_SUCCESS, 1" in result.diff
    (opened,) = preflight(gates.audit(root, "sm90"))
    assert opened.status == "open"
    report = gates.verify(root, "sm90")
    assert report.ok and any("multicast preflight opened" in c["check"] for c in report.checks)
    assert gates.apply(root, "sm90", dry_run=True).changed == []  # nothing left to open
    gates.revert(root)
    assert tree_digest(root) == before  # byte for byte


def test_source_segment_is_the_standard_one_without_resplitting():
    """The cached segment reader gives ast.get_source_segment's text for every node (multi-line, non-ASCII, CRLF)."""
    import ast

    from verifylab.gates.source import source_segment

    source = 'def f(x):\r\n    return "é" if (x\n        or y) else {"k": [1,\r 2]}\n\nz = f(1)  # ünïcode\n'
    for node in ast.walk(ast.parse(source)):
        if hasattr(node, "lineno"):
            assert source_segment(source, node) == ast.get_source_segment(source, node), ast.dump(node)
