"""The client does not trust the server blindly (#17 item 7): SSE as the format defines it (CRLF, event and
comment lines), token counts that only grow and never pass what was asked, short answers failing, and an answer
sent in one JSON piece read as such."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from verifylab.bench.client import Client
from verifylab.bench.sse import sse_events


def test_sse_events_follow_the_format():
    stream = b': keep-alive\r\n\r\nevent: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\nid: 7\ndata:[DONE]\n\ndata: {"part'
    events, rest = sse_events(stream)
    assert events == [b'{"a":\n1}', b"[DONE]"] and rest == b'data: {"part'
    assert sse_events(b"data: x\r\rdata: y\n\n") == ([b"x", b"y"], b"")


def answer(chunks: list[int], crlf: bool = False, as_json: bool = False):
    """A tiny server whose /generate streams the given running token counts (or answers once, in JSON)."""
    sep = b"\r\n\r\n" if crlf else b"\n\n"

    async def generate(request: web.Request) -> web.StreamResponse:
        if as_json:
            return web.json_response({"text": "x", "meta_info": {"completion_tokens": chunks[-1], "prompt_tokens": 3}})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"event: message" + sep[: len(sep) // 2] + b": comment" + sep)
        for n in chunks:
            body = {"text": "t" * n, "meta_info": {"completion_tokens": n, "prompt_tokens": 3}}
            await resp.write(b"data: " + json.dumps(body).encode() + sep)
        await resp.write(b"data: [DONE]" + sep)
        return resp

    app = web.Application()
    app.router.add_post("/generate", generate)
    return app


async def ask(app: web.Application, max_tokens: int):
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        async with Client(f"http://127.0.0.1:{port}") as client:
            return await client.generate("p", max_tokens)
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    ("chunks", "kwargs", "max_tokens", "ok", "error"),
    [
        ([4, 8, 12, 16], {"crlf": True}, 16, True, None),
        ([4, 8, 10], {}, 32, False, "short answer: 10 of 32 tokens"),
        ([4, 100000], {}, 16, False, "server reported 100000 tokens for max 16"),
        ([8, 4, 16], {}, 16, False, "token count went back from 8 to 4"),
        ([16], {"as_json": True}, 16, True, None),
    ],
)
def test_what_the_server_says_is_checked(chunks, kwargs, max_tokens, ok, error):
    result = asyncio.run(ask(answer(chunks, **kwargs), max_tokens))
    assert result.ok is ok, result.error
    if error:
        assert error in result.error
    else:
        assert result.output_tokens == max_tokens


# --- round two (#27 item 5) -----------------------------------------------------------------------------------------
def test_events_fed_in_any_pieces_are_the_events_of_the_whole_stream():
    from verifylab.bench.sse import SSEParser

    stream = b'data: {"a":\r\ndata: 1}\r\n\r\n: c\r\rdata: ' + b"x" * 300_000 + b"\n\ndata: [DONE]\r\n\r\n"
    whole, _ = sse_events(stream)
    for size in (1, 2, 3, 7, 65_536):  # every boundary: inside CRLF, between the two newlines, mid-line
        parser = SSEParser()
        got = [e for i in range(0, len(stream), size) for e in parser.feed(stream[i : i + size])]
        assert got == whole, size


def test_a_redirect_to_another_host_is_not_followed():
    async def generate(request: web.Request) -> web.StreamResponse:
        raise web.HTTPTemporaryRedirect("http://elsewhere.example:30000/generate")

    app = web.Application()
    app.router.add_post("/generate", generate)
    result = asyncio.run(ask(app, 16))
    assert (
        not result.ok and "HTTP 307 redirect to http://elsewhere.example:30000/generate: not followed" in result.error
    )


def test_chunks_read_in_one_batch_give_no_inter_token_latency():
    from verifylab.bench.client import RequestResult

    busy = RequestResult("p", "c", ok=True, output_tokens=4, chunk_times=[0.1, 0.2, 0.2, 0.2], chunk_tokens=[1] * 4)
    busy.chunk_batched = [False, False, True, True]  # the last two arrived in the read of the second
    assert busy.per_token_latency_s == pytest.approx([0.1]) and busy.batched_chunks == 2
    busy.chunk_batched = [False, True, True, True]
    assert busy.per_token_latency_s == []  # no gap measured: no ITL, rather than 0.0 ms


def test_a_stream_read_late_marks_its_chunks_batched():
    """The server sends four events in one write (as a starved client would read them): their gaps are not
    measured, so no inter-token latency of 0.0 is stored."""

    async def generate(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        body = b"".join(
            b"data: " + json.dumps({"text": "t", "meta_info": {"completion_tokens": n}}).encode() + b"\n\n"
            for n in (4, 8, 12, 16)
        )
        await resp.write(body + b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/generate", generate)
    result = asyncio.run(ask(app, 16))
    assert result.ok and result.batched_chunks == 3 and result.per_token_latency_s == []


@pytest.mark.parametrize("verify_ct", [-1, 0, 17, "x", float("nan")])
def test_an_impossible_verify_count_gives_no_accept_length(verify_ct):
    from verifylab.bench.client import RequestResult
    from verifylab.bench.method import checked_accept_length

    results = [RequestResult("p", "c", ok=True, output_tokens=16, meta={"spec_verify_ct": verify_ct})]
    value, notes = checked_accept_length(results, None)
    assert value is None and "impossible verify-pass counts" in notes[0]


def test_an_accept_length_the_server_contradicts_is_not_stored():
    from verifylab.bench.client import RequestResult
    from verifylab.bench.method import checked_accept_length, single_stream_summary

    results = [RequestResult("p", "c", ok=True, output_tokens=16, meta={"spec_verify_ct": 1}, e2e_s=1.0)]
    value, notes = checked_accept_length(results, 2.0)  # 16 tokens per pass against the server's 2.0
    assert value is None and "disagrees with the server's 2.00" in notes[0]
    assert checked_accept_length(results, 15.0) == (16.0, [])
    summary = single_stream_summary(results, 2.0)
    assert summary["accept_length"] is None and summary["notes"]
    json.loads(json.dumps(summary, allow_nan=False))  # no NaN anywhere: --json is valid JSON
