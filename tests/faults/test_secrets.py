"""Credentials never reach what verifylab writes (#17 item 1): launch flags, manifests, server logs, URLs,
environment."""

from __future__ import annotations

from verifylab.bench.method import SingleStreamConfig
from verifylab.redact import REDACTED, is_secret_name, redact_args, redact_obj, redact_text
from verifylab.store.env import redact_environment

from ..test_bench import base

SECRET = "sk-live-0123456789abcdef"


def test_secret_names_are_keys_tokens_and_passwords_not_counts_or_tokenizers():
    secret = ["api_key", "--admin-api-key", "hf_token", "db_password", "auth_token", "aws_secret_access_key", "token"]
    plain = ["max_total_tokens", "tokenizer_path", "speculative_num_draft_tokens", "skip_tokenizer_init", "author"]
    assert all(is_secret_name(n) for n in secret)
    assert not any(is_secret_name(n) for n in plain)


def test_flags_text_urls_and_parameters_are_redacted():
    assert redact_args(["--api-key", SECRET, "--hf-token=abc", "--max-total-tokens", "8"]) == [
        "--api-key",
        REDACTED,
        f"--hf-token={REDACTED}",
        "--max-total-tokens",
        "8",
    ]
    log = f"ServerArgs(model_path='/m', api_key='{SECRET}', max_total_tokens=4096, hf_token=None)"
    assert redact_text(log) == log.replace(SECRET, REDACTED)
    assert redact_text("http://user:hunter2@proxy:3128/x") == f"http://user:{REDACTED}@proxy:3128/x"
    params = {"base": {"extra_args": ["--api-key", SECRET], "api_key": SECRET, "model_path": "/m"}}
    assert SECRET not in str(redact_obj(params)) and "/m" in str(redact_obj(params))


def test_environment_redaction_covers_passwd_auth_credential_and_url_passwords():
    env = {
        "NCCL_PASSWD": "x",
        "HF_AUTH": "y",
        "SGLANG_CREDENTIAL_FILE": "z",
        "HF_ENDPOINT": "https://me:hunter2@mirror/",
        "CUDA_VISIBLE_DEVICES": "0,1",
    }
    kept = redact_environment(env)
    assert {k: kept[k] for k in ("NCCL_PASSWD", "HF_AUTH", "SGLANG_CREDENTIAL_FILE")} == dict.fromkeys(
        ("NCCL_PASSWD", "HF_AUTH", "SGLANG_CREDENTIAL_FILE"), REDACTED
    )
    assert kept["HF_ENDPOINT"] == f"https://me:{REDACTED}@mirror/" and kept["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_a_campaign_with_an_api_key_stores_no_secret(tmp_path):
    """The key is in the launch flags (manifest parameters) and in SGLang's start-up log (its ServerArgs line)."""
    from verifylab.bench.campaign import run_campaign

    run_campaign(
        base("--api-key", SECRET),
        ["baseline"],
        SingleStreamConfig(1, 0, 4),
        [1],
        4,
        tmp_path / "data",
        "20261130-000000-secret",
        "test double (not data)",
    )
    run = tmp_path / "data" / "runs" / "20261130-000000-secret"
    files = [p for p in run.rglob("*") if p.is_file()]
    assert (run / "logs" / "server-baseline.log").is_file()
    assert "api_key='<redacted>'" in (run / "logs" / "server-baseline.log").read_text()
    assert all(SECRET.encode() not in p.read_bytes() for p in files), [p.name for p in files]
    assert REDACTED in (run / "manifest.json").read_text()
