"""#27 item 7: the case study's own edit of SGLang 0.5.9 (seed 001: ``or _is_sm120_supported`` added to
``apply_flashinfer_allreduce_fusion``) reads a name 0.5.9 defines nowhere: the first batch on SM120 raises
NameError. ``gates verify`` passed that tree with every check "ok"; it now reports it broken, with the line, and
``gates audit`` says so in the gate's note."""

from __future__ import annotations

import shutil

import pytest

from verifylab.gates.opening import verify

from ..test_gates import pristine

COMMUNICATOR = "sglang/srt/layers/communicator.py"


@pytest.mark.slow  # downloads the SGLang 0.5.9 wheel once (cached in .cache/)
def test_a_gate_opened_by_hand_with_an_undefined_name_fails_verify(tmp_path):
    root = tmp_path / "site"
    shutil.copytree(pristine("sglang", "0.5.9"), root)
    path = root / COMMUNICATOR
    text = path.read_text()
    assert "(_is_sm90_supported or _is_sm100_supported)" in text and "_is_sm120_supported" not in text
    path.write_text(
        text.replace(
            "(_is_sm90_supported or _is_sm100_supported)",
            "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)",
        )
    )
    report = verify(root, "sm120")
    broken = [c for c in report.checks if not c["ok"] and "every name the gate reads" in c["check"]]
    assert len(broken) == 1 and broken[0]["check"].startswith(f"{COMMUNICATOR}:")
    assert "_is_sm120_supported defined nowhere" in broken[0]["detail"] and broken[0]["detail"].startswith("line ")
    assert not report.ok
    from verifylab.gates.inventory import audit

    (gate,) = [f for f in audit(root, "sm120").findings if f.file == COMMUNICATOR and f.kind == "boolean_gate"]
    assert gate.status == "open" and gate.note.startswith("BROKEN: _is_sm120_supported defined nowhere")
