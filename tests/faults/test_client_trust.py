"""The client does not trust the server blindly (#17 item 7): SSE as the format defines it (CRLF, event and
comment lines), token counts that only grow and never pass what was asked, short answers failing, and an answer
sent in one JSON piece read as such."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from verifylab.bench.client import Client, sse_events


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
