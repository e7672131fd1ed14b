"""Issue 70, credentials: a token known by its shape (``ghp_``, ``hf_``, ``sk-live-`` ...) under a name not known as
secret never reaches a run's pages, the runs index or what the book exports from them, and ``verifylab env`` does
not record one; while prose such as "verify pass: fused vs elimination" keeps its words. At 7ac0507 a label, a note, a
parameter or an unknown variable holding one was shown as written, and "pass:" was taken for a password key.
The boundary: ``verifylab.redact`` (values by shape) applied by ``store.manifest.Manifest`` to every manifest read."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.publish.run_pages import run_page
from verifylab.redact import redact_text
from verifylab.store.runs import RunStore

# the shapes the issue names, then held-out ones the filter was not written against in this test
SHAPES = {
    "github": "ghp_" + "R8kq2Zt5Wn1Lx0Vb7Hc3Jd9Mf4Pg6Sy2Tu5E",
    "hugging face": "hf_" + "qWeRtYuIoP1234aSdFgHjKl5678ZxCvBnM",
    "stripe live": "sk-live-" + "4eC39HqLyjWDarjtT1zdp7dc",
}
HELD_OUT = {
    "aws key id": "AKIA" + "IOSFODNN7EXAMPLE",
    "gitlab": "glpat-" + "xF3kP9qZ2mN7vB1cR8tY",
    "slack bot": "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl",
    "github fine-grained": "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstu",
    "jwt": "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}
PROSE = "verify pass: fused vs elimination; per token: 12 us; session: 2026-12-05"


def _hand_written_manifest(folder, token: str) -> None:
    """A manifest as something other than verifylab wrote it (an rsync, an edit): the token in every free field."""
    run_id = "20261205-000000-tokens"
    data = {
        "schema_version": 2,
        "run_id": run_id,
        "label": f"H200 box {token}",
        "purpose": f"bench with {token}",
        "created": datetime(2026, 12, 5, tzinfo=UTC).isoformat(),
        "host": "gpu-box",
        "gpu_name": "NVIDIA H200",
        "compute_capability": "9.0",
        "gpu_count": 1,
        "interconnect": "single GPU",
        "driver": None,
        "cuda": None,
        "versions": {},
        "parameters": {"extra_headers": f"X-Trace: {token}", "base": {"extra_args": ["--header", token]}},
        "git_commit": None,
        "environment": {"SGLANG_EXTRA_HEADERS": token, "NCCL_DEBUG": "INFO"},
        "notes": [f"pulled weights with {token}", PROSE],
        "campaign": "live-smoke",
    }
    (folder / run_id).mkdir(parents=True)
    (folder / run_id / "manifest.json").write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("token", [*SHAPES.values(), *HELD_OUT.values()], ids=[*SHAPES, *HELD_OUT])
def test_a_token_by_its_shape_reaches_no_page_index_or_export(tmp_path, token):
    _hand_written_manifest(tmp_path / "runs", token)
    store = RunStore(tmp_path / "runs")
    manifest = store.manifest("20261205-000000-tokens")
    shown = [
        manifest.model_dump_json(),  # what every chapter and export reads
        store.summary().to_csv(),  # the runs index
        run_page(manifest),  # the run's page
    ]
    for text in shown:
        assert token not in text
    assert "H200 box <redacted>" in shown[1]
    assert PROSE in manifest.notes and PROSE in shown[2]  # prose keeps every word
    assert manifest.environment["NCCL_DEBUG"] == "INFO"


@pytest.mark.parametrize("token", [SHAPES["hugging face"], HELD_OUT["gitlab"]])
def test_verifylab_env_does_not_record_a_token_under_an_unknown_name(monkeypatch, token):
    monkeypatch.setenv("SGLANG_DOWNLOAD_HEADER", f"Authorization-ish {token}")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    out = CliRunner().invoke(app, ["env", "--json", "--no-torch"])
    assert out.exit_code == 0, out.output
    assert token not in out.output
    assert json.loads(out.output)["environment"]["SGLANG_DOWNLOAD_HEADER"] == "Authorization-ish <redacted>"


def test_prose_is_not_a_secret_but_keys_still_are():
    kept = [PROSE, "the draft pass: 3 tokens", "secret: none here", "auth: see the README", "hf_token=None"]
    for text in kept:
        assert redact_text(text) == text
    assert redact_text("SMTP_PASS=hunter2") == "SMTP_PASS=<redacted>"
    assert redact_text("token: abc123def456") == "token: <redacted>"  # a credential-shaped value after a word
    assert redact_text('{"pass": "fused"}') == '{"pass": "<redacted>"}'  # a quoted key is a key
    assert redact_text("db_password: hunter2") == "db_password: <redacted>"
