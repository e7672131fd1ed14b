"""Bad input is one line naming what is wrong, never a traceback (#17 item 13), and one bad manifest does not
hide the other runs."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from verifylab.cli import app

from ..test_bench import free_port


def test_a_short_label_is_one_line_and_nothing_is_written(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    args = ["sweep", "--url", url, "--concurrency", "1", "--run-id", "20261130-000000-x", "--label", "ab"]
    out = CliRunner().invoke(app, [*args, "--data-dir", str(tmp_path)])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert out.output.strip() == "error: run 20261130-000000-x: field 'label': String should have at least 3 characters"


def test_a_manifest_that_is_not_utf8_is_named_and_the_other_runs_are_still_listed(tmp_path, repo_root):
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(repo_root / "data" / "runs" / "20261130-074200-2xh200-comm", runs / "20261130-074200-2xh200-comm")
    bad = runs / "20261130-000000-bad"
    bad.mkdir()
    (bad / "manifest.json").write_bytes(b"\xff\xfe{")
    shown = CliRunner().invoke(app, ["runs", "show", "20261130-000000-bad", "--data-dir", str(tmp_path)])
    assert shown.exit_code == 1 and "manifest.json: not UTF-8 text" in shown.output and "Traceback" not in shown.output
    listed = CliRunner().invoke(app, ["runs", "list", "--data-dir", str(tmp_path), "--json"])
    assert listed.exit_code == 1  # listed, and the exit code says one is broken
    rows = {r["run_id"]: r for r in json.loads(listed.output.split("\nerror:")[0])}
    assert rows["20261130-074200-2xh200-comm"]["label"]
    assert rows["20261130-000000-bad"]["status"].startswith("unreadable")
    assert "1 run(s) with an unreadable manifest" in listed.output


def test_an_audit_file_that_is_a_json_list_is_named(tmp_path):
    (tmp_path / "site" / "sglang").mkdir(parents=True)
    audit = tmp_path / "audit.json"
    audit.write_text("[1, 2]")
    out = CliRunner().invoke(app, ["gates", "apply", "--root", str(tmp_path / "site"), "--audit", str(audit)])
    assert out.exit_code == 2 and "not an audit --json file" in out.output and "Traceback" not in out.output


def test_gates_status_of_a_folder_without_sglang_is_an_error_not_clean(tmp_path):
    missing = CliRunner().invoke(app, ["gates", "status", "--root", str(tmp_path / "site-pakages")])
    assert missing.exit_code == 1 and missing.output.strip() == f"error: {tmp_path / 'site-pakages'}: no such folder"
    empty = CliRunner().invoke(app, ["gates", "status", "--root", str(tmp_path)])
    assert empty.exit_code == 1 and "holds neither sglang/ nor flashinfer/" in empty.output
    assert "clean" not in empty.output


def test_a_url_without_http_is_refused_before_any_request(tmp_path):
    for command in ("bench", "sweep"):
        out = CliRunner().invoke(app, [command, "--url", "localhost:30000", "--data-dir", str(tmp_path)])
        assert out.exit_code == 2, out.output
        assert out.output.strip() == (
            "error: --url 'localhost:30000': not an http:// or https:// address, e.g. http://127.0.0.1:30000"
        )
    assert not any(tmp_path.iterdir())


def test_runs_list_of_a_data_dir_that_does_not_exist_is_an_error_not_an_empty_store(tmp_path):
    out = CliRunner().invoke(app, ["runs", "list", "--data-dir", str(tmp_path / "dta")])
    said = out.output.strip()
    assert out.exit_code == 2 and said.startswith(f"error: --data-dir {tmp_path / 'dta'}: no such folder ("), said
    assert said.endswith("give --data-dir PATH/TO/data") and "\n" not in said  # one line that says what to give
    empty = CliRunner().invoke(app, ["runs", "list", "--data-dir", str(tmp_path)])
    assert empty.exit_code == 0 and "no runs stored" in empty.output
