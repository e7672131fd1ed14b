"""Issue 53 class 4: a manifest's credentials never reach a run page (nor, through it, the search index), whatever
wrote the manifest. At dc55d9b the store redacted what it wrote, but a page showed a manifest as it was read: an
older or edited one put ``SGLANG_API_KEY``, ``HF_TOKEN`` and a URL's password on its page. The boundary:
``publish.run_pages.shown_manifest`` passes every field through ``verifylab.redact`` before a page is made."""

from __future__ import annotations

from datetime import UTC, datetime

from verifylab.publish.run_pages import run_page
from verifylab.store.manifest import Manifest

SECRETS = ["sk-live-0123456789abcdef", "hf_abcdefghijklmnopqrstuvwxyz", "hunter2pass"]


def test_a_hand_written_manifest_shows_no_secret_on_its_page():
    manifest = Manifest.model_construct(
        run_id="20261203-000000-secrets",
        label="box at https://ops:hunter2pass@host.example",
        purpose="",
        created=datetime(2026, 12, 3, tzinfo=UTC),
        host="h",
        gpu_name="H200",
        compute_capability="9.0",
        gpu_count=1,
        interconnect="single GPU",
        driver=None,
        cuda=None,
        versions=Manifest.model_fields["versions"].annotation(),  # type: ignore[misc]
        parameters={"api_key": SECRETS[0], "base": {"extra_args": ["--api-key", SECRETS[0]]}},
        git_commit=None,
        environment={"SGLANG_API_KEY": SECRETS[0], "HF_TOKEN": SECRETS[1], "NCCL_DEBUG": "INFO"},
        notes=[f"fetched with Authorization: Bearer {SECRETS[1]}"],
        tables={},
        topology=None,
        status="complete",
        mechanics_only=False,
        kind="measured",
    )
    page = run_page(manifest)
    for secret in SECRETS:
        assert secret not in page
    assert "SGLANG_API_KEY=" in page and "NCCL_DEBUG=INFO" in page  # the names stay, the values go
