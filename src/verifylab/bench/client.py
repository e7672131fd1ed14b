"""Streaming client for SGLang's native ``/generate`` (and the OpenAI ``/v1/completions`` API).

Per request it records time to first token, the arrival time and *token count* of every chunk (under
speculative decoding one chunk carries several tokens: tokens are counted from ``completion_tokens``, never
from chunks), end-to-end time and the final ``meta_info``. Timestamps are taken when a chunk's bytes
arrive, before any JSON parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp

from verifylab.bench.sse import SSEParser
from verifylab.errors import BenchmarkError

SPEC_FIELDS = (
    "spec_verify_ct",
    "spec_accept_length",
    "spec_accept_token_num",
    "spec_draft_token_num",
    "spec_accept_rate",
)


@dataclass
class RequestResult:
    """One request's timings and counts (times in seconds from the request's start)."""

    prompt_id: str
    category: str
    ok: bool
    error: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft_s: float | None = None
    e2e_s: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    chunk_batched: list[bool] = field(default_factory=list)  # read together with the chunk before: no real gap
    meta: dict = field(default_factory=dict)
    first_meta: dict = field(default_factory=dict)
    output_ids: list[int] | None = None
    text: str = ""

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (n - 1): time per output token after the first."""
        if self.e2e_s is None or self.ttft_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def inter_chunk_s(self) -> list[float]:
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:], strict=False)]

    @property
    def per_token_latency_s(self) -> list[float]:
        """Each chunk's gap spread over the tokens it carried (one value per token after the first chunk). A chunk
        the client read in one batch with the one before (a busy client) has no measured gap and is left out:
        its 0.0 is the client's lateness, not the server's speed."""
        out: list[float] = []
        batched = self.chunk_batched[1:] or [False] * (len(self.chunk_times) - 1)
        for gap, tokens, late in zip(self.inter_chunk_s, self.chunk_tokens[1:], batched, strict=False):
            if tokens > 0 and not late:
                out.extend([gap / tokens] * tokens)
        return out

    @property
    def batched_chunks(self) -> int:
        """Chunks read in one batch with the chunk before them (their gaps were not measured)."""
        return sum(self.chunk_batched[1:])

    @property
    def output_tokens_per_s(self) -> float | None:
        return self.output_tokens / self.e2e_s if self.e2e_s else None


def parse_spec_meta(meta: dict) -> dict:
    """Speculative fields of a final ``meta_info`` in any spelling SGLang versions have used."""
    out = {k: meta[k] for k in SPEC_FIELDS if meta.get(k) is not None}
    if "spec_verify_ct" not in out and "spec_accept_length" in out and meta.get("completion_tokens"):
        out["spec_verify_ct"] = meta["completion_tokens"] / out["spec_accept_length"]
    return out


def accept_length(results: list[RequestResult]) -> float | None:
    """Token-weighted accept length over a run: sum(completion tokens) / sum(verify passes); None unless every
    request reports a pass count a decode can have (at least one pass, at most one per token)."""
    ok = [r for r in results if r.ok]
    verifies = [parse_spec_meta(r.meta).get("spec_verify_ct") for r in ok]
    if not verifies or any(not plausible_verify_count(v, r.output_tokens) for v, r in zip(verifies, ok, strict=True)):
        return None
    passes = sum(float(v) for v in verifies if v is not None)
    return sum(r.output_tokens for r in ok) / passes


def plausible_verify_count(verify_ct: object, output_tokens: int) -> bool:
    """A verify-pass count a request of ``output_tokens`` tokens can report: a number >= 1 and no more passes than
    tokens (each pass yields at least one token: an accept length below 1 is impossible)."""
    if isinstance(verify_ct, bool) or not isinstance(verify_ct, int | float) or verify_ct != verify_ct:
        return False
    return 1 <= verify_ct <= max(output_tokens, 1)


def token_count(value: object) -> int:
    """A token count as the server reported it: a whole number >= 0 ("two", NaN or -3 is refused in one line)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0 or value % 1:
        raise BenchmarkError(f"the server reported {str(value)[:40]!r} as a token count")
    return int(value)


REQUEST_DEADLINE_S = 600.0  # a request that has not finished by then fails, named (every sweep's default)
TEST_DOUBLE_HEADER = "X-Verifylab-Test-Double"  # what verifylab.testing.server puts on every answer


def _refuse_redirect(url: str, resp: aiohttp.ClientResponse) -> None:
    """A redirect is never followed: what answers at another address is not the server being measured."""
    if 300 <= resp.status < 400:
        target = resp.headers.get("Location", "nowhere")
        raise BenchmarkError(
            f"{url}: HTTP {resp.status} redirect to {target[:200]}: not followed (measure that server)"
        )


class Client:
    """An aiohttp session bound to one server URL."""

    def __init__(
        self,
        url: str,
        api: str = "generate",
        timeout_s: float = REQUEST_DEADLINE_S,
        stall_s: float = 60.0,
        temperature: float = 0.0,
    ) -> None:
        if api not in ("generate", "openai"):
            raise BenchmarkError(f"--api {api!r}: use 'generate' (SGLang native) or 'openai'")
        if not 0.0 <= temperature <= 2.0:
            raise BenchmarkError(f"temperature {temperature!r}: give 0 (greedy) to 2")
        self.url, self.api, self.stall_s, self.deadline_s = url.rstrip("/"), api, stall_s, timeout_s
        self.waiting: dict[int, float] = {}  # a request in flight -> when it last had a token (or started)
        self.temperature = temperature  # every request's sampling temperature (> 0: streams diverge)
        self.timeout = aiohttp.ClientTimeout(total=timeout_s, sock_read=stall_s)
        self.session: aiohttp.ClientSession | None = None
        self.saw_test_double = False  # an answer came from verifylab's test double (its header)

    async def __aenter__(self) -> Client:
        self.session = aiohttp.ClientSession(
            timeout=self.timeout, connector=aiohttp.TCPConnector(limit=0, force_close=False)
        )
        return self

    async def __aexit__(self, *exc) -> None:
        if self.session:
            await self.session.close()

    async def get_json(self, *paths: str) -> dict:
        """GET the first path that answers 200 (e.g. /server_info then /get_server_info)."""
        assert self.session
        for path in paths:
            try:
                async with self.session.get(self.url + path, allow_redirects=False) as resp:
                    if resp.status == 200:
                        return await resp.json(content_type=None)
                    _refuse_redirect(self.url + path, resp)
            except aiohttp.ClientError as exc:
                raise BenchmarkError(f"{self.url}{path}: cannot reach the server ({exc})") from None
        raise BenchmarkError(f"{self.url}: none of {', '.join(paths)} answered 200")

    async def post(self, path: str, body: dict | None = None) -> int:
        """POST and return the status; an unreachable server is one line naming the URL, not a traceback."""
        assert self.session
        try:
            async with self.session.post(self.url + path, json=body or {}, allow_redirects=False) as resp:
                await resp.read()
                _refuse_redirect(self.url + path, resp)
                return resp.status
        except aiohttp.ClientError as exc:
            raise BenchmarkError(f"{self.url}{path}: cannot reach the server ({exc})") from None

    async def warm(self, connections: int) -> None:
        """Open ``connections`` keep-alive connections (a GET of /health on each, at once): a cell's first wave
        then measures the server, not the client's own start-up. No generation: the server's counters (its accept
        length) see only the cell's requests. Its failures are the cell's to find."""
        assert self.session

        async def touch() -> None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with self.session.get(self.url + "/health", allow_redirects=False) as resp:  # type: ignore[union-attr]
                    await resp.read()

        await asyncio.gather(*(touch() for _ in range(connections)))

    async def generate(
        self,
        prompt: str,
        max_tokens: int,
        prompt_id: str = "",
        category: str = "",
        stream: bool = True,
        input_ids: Sequence[int] = (),
    ) -> RequestResult:
        """One request (``input_ids``: sent as token ids instead of ``prompt``'s text); failures are returned as
        ``ok=False`` with the error, never raised."""
        assert self.session
        result = RequestResult(prompt_id, category, ok=False)
        key = id(result)
        self.waiting[key] = time.perf_counter()
        try:
            return await self._generate(result, prompt, max_tokens, stream, input_ids)
        finally:
            self.waiting.pop(key, None)

    def stalled(self, longer_than_s: float) -> tuple[int, float]:
        """How many requests in flight have had no token for more than ``longer_than_s`` seconds, and the longest
        wait (s)."""
        now = time.perf_counter()
        waits = [now - last for last in self.waiting.values() if now - last > longer_than_s]
        return len(waits), max(waits, default=0.0)

    async def _generate(
        self, result: RequestResult, prompt: str, max_tokens: int, stream: bool, input_ids: Sequence[int]
    ) -> RequestResult:
        assert self.session
        given: dict[str, object] = {"input_ids": list(input_ids)} if input_ids else {"text": prompt}
        if self.api == "generate":
            path = "/generate"
            body = {
                **given,
                "stream": stream,
                "sampling_params": {"max_new_tokens": max_tokens, "temperature": self.temperature, "ignore_eos": True},
            }
        else:
            path = "/v1/completions"
            body = {
                "model": "default",
                "prompt": list(input_ids) if input_ids else prompt,
                "max_tokens": max_tokens,
                "temperature": self.temperature,
                "stream": True,
                "ignore_eos": True,
                "stream_options": {"include_usage": True},
            }
        start = time.perf_counter()
        try:
            async with self.session.post(self.url + path, json=body, allow_redirects=False) as resp:
                _refuse_redirect(self.url + path, resp)
                self.saw_test_double |= TEST_DOUBLE_HEADER in resp.headers
                if resp.status != 200:
                    detail = (await resp.text())[:200]
                    result.error = f"HTTP {resp.status}: {detail}"
                    return result
                if (not stream and self.api == "generate") or resp.content_type == "application/json":
                    data = await resp.json(content_type=None)  # asked or not, the answer came in one piece
                    result.e2e_s = time.perf_counter() - start
                    self._final(result, data)
                    result.ok = True
                else:
                    await self._read_stream(resp, result, start, max_tokens)
                if result.ok and result.output_tokens < max_tokens:  # ignore_eos: every token asked must come
                    result.ok = False
                    result.error = f"short answer: {result.output_tokens} of {max_tokens} tokens"
                return result
        except TimeoutError:
            if time.perf_counter() - start >= self.deadline_s:
                result.error = f"deadline: the request did not finish within {self.deadline_s:g} s"
            else:
                result.error = f"timeout: the server stalled (no token within {self.stall_s:g} s)"
        except aiohttp.ClientPayloadError as exc:
            result.error = f"connection dropped mid-stream ({exc.__class__.__name__})"
        except aiohttp.ClientError as exc:
            result.error = f"{exc.__class__.__name__}: {exc}"
        except BenchmarkError as exc:
            result.error = str(exc)
        except ValueError as exc:  # an answer that is not JSON, or not UTF-8
            result.error = f"the server's answer is not JSON text ({exc.__class__.__name__}: {str(exc)[:120]})"
        return result

    async def _read_stream(
        self, resp: aiohttp.ClientResponse, result: RequestResult, start: float, max_tokens: int
    ) -> None:
        parser = SSEParser()
        done = False
        last: dict | None = None
        last_token = 0.0  # the stall clock runs on tokens: keep-alive comments and empty chunks do not reset it
        async for data in resp.content.iter_any():
            now = time.perf_counter() - start
            if now - last_token > self.stall_s:
                raise TimeoutError
            read_before = len(result.chunk_times)  # chunks of this read after its first were not timed apart
            for payload in parser.feed(data):
                payload = payload.strip()
                if payload == b"[DONE]":
                    done = True
                    break
                try:
                    chunk = json.loads(payload)
                except ValueError:  # not JSON, or not UTF-8
                    raise BenchmarkError(f"malformed stream chunk: {payload[:80]!r}") from None
                if not isinstance(chunk, dict):
                    raise BenchmarkError(
                        f"stream chunk is a JSON {type(chunk).__name__}, not an object: {payload[:80]!r}"
                    )
                before, chunks = result.output_tokens, len(result.chunk_times)
                if self._chunk(result, chunk, now):
                    last = chunk
                if len(result.chunk_times) > chunks:  # a chunk with tokens (OpenAI chunks do not count them)
                    last_token = now
                    self.waiting[id(result)] = start + now
                    result.chunk_batched.append(len(result.chunk_times) - 1 > read_before)
                self._check_count(result, before, chunk, max_tokens)
            if done:
                break
        if last is not None:
            self._final(result, last)
        if not done:
            raise BenchmarkError("stream ended without [DONE]: connection dropped mid-stream")
        result.e2e_s = result.chunk_times[-1] if result.chunk_times else time.perf_counter() - start
        result.ok = result.output_tokens > 0

    @staticmethod
    def _chunk_openai(result: RequestResult, chunk: dict, now: float) -> bool:
        if chunk.get("usage"):
            result.output_tokens = chunk["usage"].get("completion_tokens", result.output_tokens)
            result.prompt_tokens = chunk["usage"].get("prompt_tokens", 0)
            return False
        if result.ttft_s is None:
            result.ttft_s = now
        result.chunk_times.append(now)
        result.chunk_tokens.append(0)  # the OpenAI stream does not say how many tokens a chunk holds
        return False

    def _chunk(self, result: RequestResult, chunk: dict, now: float) -> bool:
        """Record one chunk; True when it carried new tokens (the latest such chunk is finalized)."""
        if self.api == "openai":
            return self._chunk_openai(result, chunk, now)
        tokens = token_count((chunk.get("meta_info") or {}).get("completion_tokens", 0))
        new = tokens - result.output_tokens
        if new <= 0:
            return False
        if result.ttft_s is None:
            result.ttft_s = now
            result.first_meta = chunk.get("meta_info") or {}
        result.chunk_times.append(now)
        result.chunk_tokens.append(new)
        result.output_tokens = tokens
        return True

    @staticmethod
    def _check_count(result: RequestResult, before: int, chunk: dict, max_tokens: int) -> None:
        """The server's token count only grows and never passes what was asked (a jump to 100,000 tokens would
        make a throughput of 564,330 tok/s)."""
        reported = token_count((chunk.get("meta_info") or {}).get("completion_tokens", result.output_tokens))
        if reported < before:
            raise BenchmarkError(f"token count went back from {before} to {reported}: the stream is not trusted")
        if max(reported, result.output_tokens) > max_tokens:
            raise BenchmarkError(f"server reported {max(reported, result.output_tokens)} tokens for max {max_tokens}")

    @staticmethod
    def _final(result: RequestResult, data: object) -> None:
        if not isinstance(data, dict) or not isinstance(data.get("meta_info") or {}, dict):
            raise BenchmarkError(f"the server's answer is a JSON {type(data).__name__} without a meta_info object")
        meta = data.get("meta_info") or {}
        result.meta = meta
        result.output_tokens = token_count(meta.get("completion_tokens", result.output_tokens))
        result.prompt_tokens = token_count(meta.get("prompt_tokens", result.prompt_tokens))
        result.text = data.get("text", result.text)
        if data.get("output_ids") is not None:
            result.output_ids = list(data["output_ids"])
        if result.ttft_s is None and result.e2e_s is not None:
            result.ttft_s = result.e2e_s
