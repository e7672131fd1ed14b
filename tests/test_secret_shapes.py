"""#77, secrets: one detector finds credentials by shape wherever free text stands (key blocks, tokens, connection
strings, credentials in URLs), and a manifest's typed fields (commit, driver, CUDA, versions) keep a value of their
type and send any other text through it. Provenance survives: every commit, run id and pinned URL of the shipped data
reads the same after redaction."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifylab.redact import REDACTED, redact_text
from verifylab.store.evidence import Evidence
from verifylab.store.manifest import Manifest

ROOT = Path(__file__).resolve().parents[1]
SECRETS = {  # the shapes the issue names, each with the secret part that must not survive
    "private key": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq9\n-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA7bq9"
    ),
    "redis url": ("redis://:hunter2hunter2@cache:6379/0", "hunter2hunter2"),
    "azure": ("AccountName=a;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;EndpointSuffix=x", "Zm9vYmFyYmF6cXV4MTIzNDU2"),
    "aws secret": ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    "slack webhook": ("https://hooks.slack.com/services/T0001/B0001/abcdefghijklmnopqrstuvwx", "abcdefghijklmnop"),
    "docker pat": ("dckr_pat_2b3e36beeb386dfdaacb9b46004ccb7c", "2b3e36beeb386dfdaacb9b46004ccb7c"),
    "github": ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789"),
    "url query key": ("http://127.0.0.1:30000/v1?api_key=k3y-v4lue", "k3y-v4lue"),  # "http:" read the rest as its value
    "url query token": ("https://h/generate?stream=1&token=s3cr3t&x=2", "s3cr3t"),
}  # fmt: skip


def test_a_urls_query_keeps_what_is_not_a_credential():
    url = "http://h:30000/v1?max_tokens=128&model=kimi&api_key=abc#top"
    assert redact_text(url) == f"http://h:30000/v1?max_tokens=128&model=kimi&api_key={REDACTED}#top"


@pytest.mark.parametrize("shape", SECRETS)
def test_every_named_shape_is_found_in_free_text(shape):
    text, secret = SECRETS[shape]
    out = redact_text(f"note: launched with {text} on the box")
    assert secret not in out and REDACTED in out


def _manifest(**fields) -> Manifest:
    base = json.loads((ROOT / "data/runs/20261206-055842-h100-engine-context/manifest.json").read_text())
    return Manifest.model_validate({**base, **fields})


@given(st.sampled_from(list(SECRETS)), st.sampled_from(["git_commit", "driver", "cuda", "versions"]))
def test_a_secret_in_a_typed_field_is_redacted(shape, field):
    text, secret = SECRETS[shape]
    value = {"torch": text, "custom": f"1.0 {text}"} if field == "versions" else text
    dumped = _manifest(**{field: value}).model_dump_json()
    assert secret not in dumped


@given(st.text(alphabet="0123456789abcdef", min_size=7, max_size=40), st.booleans())
def test_a_commit_or_a_version_of_its_type_is_kept(commit, dirty):
    commit += "-dirty" if dirty else ""
    m = _manifest(git_commit=commit, driver="580.159.04", cuda="13.0", versions={"torch": "2.11.0+cu130"})
    assert (m.git_commit, m.driver, m.cuda, m.versions.torch) == (commit, "580.159.04", "13.0", "2.11.0+cu130")


def test_provenance_survives_redaction():
    ev = Evidence(ROOT / "data")
    for folder in sorted((ROOT / "data" / "runs").glob("*/manifest.json")):
        raw = json.loads(folder.read_text())
        hashes = re.findall(r"[0-9a-f]{7,40}", str(raw.get("git_commit") or ""))
        kept = Manifest.model_validate(raw)
        assert all(h in str(kept.git_commit) for h in hashes), folder
        assert redact_text(kept.run_id) == kept.run_id
    for table in (ev.public, ev.public_context, ev.public_speculation):
        for url in set(table["url"]):
            assert redact_text(url) == url


def test_a_dead_chapters_log_is_printed_without_credentials_or_control_sequences(monkeypatch):
    """#77: the end of a dead kernel's log reaches the terminal with every credential the detector finds redacted
    (not only the chapter's own parameters) and no clipboard write, title or line erasure."""
    from verifylab.publish import build, ipc_kernel

    hostile = (
        "Traceback: redis://:hunter2hunter2@cache:6379/0 failed\n"
        "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\x1b[2K\x1b]0;owned\x07dckr_pat_2b3e36beeb386dfdaacb9b46004ccb7c"
    )
    monkeypatch.setattr(ipc_kernel, "last_kernel_log", lambda: hostile)
    _error, log = build.kernel_death(RuntimeError("kernel died"), set())
    assert "hunter2hunter2" not in log and "2b3e36beeb386dfdaacb9b46004ccb7c" not in log
    assert "\x1b" not in log and "\x07" not in log and "Traceback" in log
