"""#27 item 12: one line and exit 1 or 2, never a traceback, for what a server, a data folder or a command line can
hand verifylab (each case raised a Python traceback before)."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from aiohttp import web
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.errors import GateError, ManifestError, StorageError, TraceError
from verifylab.store.runs import RunStore
from verifylab.trace.reader import iter_raw

from .test_client_trust import ask

RUN = "20261130-130757-2xh200-live-tp2"


def one_piece(body: bytes):
    async def generate(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app_ = web.Application()
    app_.router.add_post("/generate", generate)
    return app_


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'{"text": "\xff\xfe", "meta_info": {"completion_tokens": 4}}', "not JSON text"),
        (b"[1, 2, 3]", "a JSON list without a meta_info object"),
        (b'{"text": "x", "meta_info": {"completion_tokens": "two"}}', "reported 'two' as a token count"),
        (b'{"text": "x", "meta_info": {"completion_tokens": NaN}}', "reported 'nan' as a token count"),
    ],
)
def test_what_a_server_answers_is_one_line_on_the_request(body, error):
    result = asyncio.run(ask(one_piece(body), 4))
    assert not result.ok and error in result.error and "\n" not in result.error


@pytest.mark.parametrize("content", [b"", b"\x00\x01\x02\xff" * 100])
def test_an_empty_or_binary_table_file_is_named(repo_root, tmp_path, content):
    store = RunStore(tmp_path / "runs")
    shutil.copytree(repo_root / "data" / "runs" / RUN, store.root / RUN)
    (store.path(RUN) / "single_stream.csv").write_bytes(content)
    with pytest.raises(ManifestError, match=r"single_stream\.csv: unreadable table"):
        store.read_table(RUN, "single_stream")


def test_a_data_folder_that_cannot_hold_a_lock_is_one_line(tmp_path):
    (tmp_path / "runs").write_text("a file where the run store should be")
    with pytest.raises(StorageError, match="cannot lock the run to write it"), RunStore(tmp_path / "runs").lock(RUN):
        pass


def test_a_trace_nested_ten_thousand_deep_is_refused(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": [' + '{"a": ' * 10_000 + "1" + "}" * 10_000 + "]}")
    with pytest.raises(TraceError, match="nests too deep"):
        list(iter_raw(path))


def test_command_lines_that_cannot_work_are_one_line_and_exit_2(tmp_path):
    from ..tracefactory import event, write_trace

    trace = write_trace(tmp_path / "x-TP-0.trace.json", [event("ProfilerStep#0", "user_annotation", 0, 10)])
    to_folder = CliRunner().invoke(app, ["trace", "summarize", str(trace), "--csv", str(tmp_path)])
    assert to_folder.exit_code == 2 and "--csv" in to_folder.output and "a folder" in to_folder.output
    bad_url = CliRunner().invoke(app, ["bench", "--url", "http://[::1", "--runs", "1"])
    assert bad_url.exit_code == 2 and "not a valid address" in bad_url.output and "Traceback" not in bad_url.output


def test_gates_verify_on_a_corrupt_manifest_or_a_deleted_patched_file(tmp_path):
    from verifylab.gates.opening import verify
    from verifylab.gates.state import STATE_DIR

    root = tmp_path / "site"
    (root / "sglang").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    (root / STATE_DIR).mkdir()
    (root / STATE_DIR / "manifest.json").write_text("{not json")
    with pytest.raises(GateError, match="unreadable gates manifest"):
        verify(root, "sm120")
    (root / STATE_DIR / "manifest.json").write_text(json.dumps({"files": ["sglang/gone.py"]}))
    report = verify(root, "sm120")
    assert any(c["detail"] == "the patched file is gone" for c in report.checks if not c["ok"])
