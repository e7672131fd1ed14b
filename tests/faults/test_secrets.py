"""Credentials never reach what verifylab writes (#17 item 1): launch flags, manifests, server logs, URLs,
environment."""

from __future__ import annotations

import pytest

from verifylab.bench.method import SingleStreamConfig
from verifylab.bench.runner import RunPlace
from verifylab.redact import (
    REDACTED,
    is_secret_name,
    measurement_environment,
    redact_args,
    redact_obj,
    redact_text,
    scrub,
    secret_values,
)

from ..test_bench import TEST_LAUNCHER, base

SECRET = "sk-live-0123456789abcdef"


def test_secret_names_are_keys_tokens_and_passwords_not_counts_or_tokenizers():
    secret = ["api_key", "--admin-api-key", "hf_token", "db_password", "auth_token", "aws_secret_access_key", "token"]
    plain = ["max_total_tokens", "tokenizer_path", "speculative_num_draft_tokens", "skip_tokenizer_init", "author"]
    assert all(is_secret_name(n) for n in secret)
    assert not any(is_secret_name(n) for n in plain)


def test_round_two_names_and_values_are_secret_too():
    """Issue 27 item 3: *_PASS, *_COOKIE, *_BEARER, *_PASSPHRASE names; bearer headers, DSNs and token-only URL
    userinfo anywhere; an environment recorded by allow-list, so an unknown secret name is never written."""
    assert all(is_secret_name(n) for n in ("SMTP_PASS", "SESSION_COOKIE", "API_BEARER", "DB_PASSPHRASE"))
    assert not any(is_secret_name(n) for n in ("bypass_graph", "compass_dir", "passes", "max_total_tokens"))
    header = f"Authorization: Bearer {SECRET}"
    assert redact_text(header) == f"Authorization: Bearer {REDACTED}"
    assert redact_text(f"postgres://user:{SECRET}@db/x") == f"postgres://user:{REDACTED}@db/x"
    assert redact_text(f"https://{SECRET}@github.com/o/r") == f"https://{REDACTED}@github.com/o/r"
    assert SECRET not in str(redact_obj({"extra_args": ["--header", header], "note": f"https://{SECRET}@h"}))
    assert secret_values({"url": f"https://{SECRET}@h"}) == {SECRET}
    env = {"SGLANG_X": f"Bearer {SECRET}", "SMTP_PASS": SECRET, "MY_SESSION_COOKIE": SECRET, "NCCL_DEBUG": "INFO"}
    assert measurement_environment(env) == {"NCCL_DEBUG": "INFO", "SGLANG_X": f"Bearer {REDACTED}"}


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_the_sweep_table_title_hides_the_url_password(tmp_path):
    from typer.testing import CliRunner

    from verifylab.cli import app
    from verifylab.server.launch import launcher_help, serve
    from verifylab.server.variants import DEFAULT_VARIANTS

    help_text = launcher_help(TEST_LAUNCHER)
    with serve(base(), DEFAULT_VARIANTS["baseline"], tmp_path, help_text=help_text) as (server, _):
        url = server.url.replace("http://", f"http://user:{SECRET}@")
        args = ["sweep", "--url", url, "--concurrency", "1", "--max-tokens", "4", "--requests-per-cell", "1"]
        out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert SECRET not in out.output and "sweep of" in out.output


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
        "SGLANG_AUTH": "y",
        "SGLANG_CREDENTIAL_FILE": "z",
        "SGLANG_MIRROR": "https://me:hunter2@mirror/",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "HF_ENDPOINT": "https://me:hunter2@mirror/",  # not a measurement setting: not recorded at all
    }
    kept = measurement_environment(env)
    assert {k: kept[k] for k in ("NCCL_PASSWD", "SGLANG_AUTH", "SGLANG_CREDENTIAL_FILE")} == dict.fromkeys(
        ("NCCL_PASSWD", "SGLANG_AUTH", "SGLANG_CREDENTIAL_FILE"), REDACTED
    )
    assert kept["SGLANG_MIRROR"] == f"https://me:{REDACTED}@mirror/" and kept["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "HF_ENDPOINT" not in kept


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_a_campaign_with_an_api_key_stores_no_secret(tmp_path):
    """The key is in the launch flags (manifest parameters) and in SGLang's start-up log (its ServerArgs line)."""
    from verifylab.bench.campaign import run_campaign

    run_campaign(
        base("--api-key", SECRET),
        ["baseline"],
        SingleStreamConfig(1, 0, 4),
        [1],
        4,
        RunPlace(tmp_path / "data", "20261130-000000-secret", "test double (not data)"),
    )
    run = tmp_path / "data" / "runs" / "20261130-000000-secret"
    files = [p for p in run.rglob("*") if p.is_file()]
    assert (run / "logs" / "server-baseline.log").is_file()
    assert "api_key='<redacted>'" in (run / "logs" / "server-baseline.log").read_text()
    assert all(SECRET.encode() not in p.read_bytes() for p in files), [p.name for p in files]
    assert REDACTED in (run / "manifest.json").read_text()


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_an_executed_chapter_keeps_no_secret_its_parameters_carried(tmp_path):
    """A live chapter needs the real key in its kernel; the executed notebook the book is built from (and offers
    for download) must not hold it: not in the injected parameters cell, papermill's metadata or an output."""
    from verifylab.publish.build import execute_chapter

    password = "hunter2-longer"
    parameters = {"extra_args": ["--api-key", SECRET], "server_url": f"http://me:{password}@box:30000"}
    head = '# %% tags=["parameters"]\nextra_args = []\nserver_url = ""\n\n# %%\n'
    ok_source = tmp_path / "09_ok.py"
    ok_source.write_text(head + 'print(" ".join(extra_args), server_url)\n')
    result = execute_chapter(ok_source, tmp_path / "out" / "09_ok.ipynb", parameters, tmp_path)
    assert result.ok, result.error
    text = (tmp_path / "out" / "09_ok.ipynb").read_text()
    assert SECRET not in text and password not in text
    assert f"--api-key {REDACTED} http://me:{REDACTED}@box:30000" in text  # the printed line, scrubbed

    failing = tmp_path / "09_failing.py"
    failing.write_text(head + 'raise RuntimeError("refused " + " ".join(extra_args))\n')
    failed = execute_chapter(failing, tmp_path / "out" / "09_failing.ipynb", parameters, tmp_path)
    assert not failed.ok and SECRET not in failed.error and REDACTED in failed.error
    assert SECRET not in (tmp_path / "out" / "09_failing.failed.ipynb").read_text()


def test_the_secrets_a_parameter_set_carries_are_found_and_scrubbed_from_strings_only():
    params = {
        "extra_args": ["--api-key", "k-one", "--admin-api-key=k-two", "--tp-size", "2"],
        "hf_token": "k-three",
        "launcher": ["python", "-m", "sglang.launch_server"],
        "note": "db_password=k-four at https://u:k-five@host/x",
        "max_total_tokens": 4096,
    }
    assert secret_values(params) == {"k-one", "k-two", "k-three", "k-four", "k-five"}
    doc = {"k-one": ["say k-one twice: k-one"], "n": 3}
    assert scrub(doc, {"k-one"}) == {"k-one": [f"say {REDACTED} twice: {REDACTED}"], "n": 3}  # keys stay
