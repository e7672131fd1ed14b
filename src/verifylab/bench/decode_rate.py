"""One stream's plain decoding rate of a running server, measured briefly for `verifylab box`: a warm-up, then a few
sequential requests of ``max_tokens`` tokens each (ignore_eos, temperature 0); the rate is 1 / the median time per
output token after the first. What the speculation model is calibrated to on that box."""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass

from verifylab.bench.client import Client
from verifylab.errors import BenchmarkError

PROMPT = "Explain, step by step and at length, how a ring all-reduce moves data between eight GPUs."


@dataclass(frozen=True)
class DecodeRate:
    """The measured rate and how it was measured."""

    tokens_per_s: float
    tpot_ms: list[float]
    url: str
    max_tokens: int

    @property
    def source(self) -> str:
        return (
            f"measured: {len(self.tpot_ms)} requests x {self.max_tokens} tokens at one stream on {self.url}, "
            f"median time per output token {statistics.median(self.tpot_ms):.2f} ms"
        )


async def _measure(url: str, requests: int, max_tokens: int) -> list[float]:
    async with Client(url) as client:
        warm = await client.generate(PROMPT, min(max_tokens, 32), "warmup")
        if not warm.ok:
            raise BenchmarkError(f"{url}: the warm-up request failed ({warm.error})")
        tpots = []
        for i in range(requests):
            result = await client.generate(PROMPT, max_tokens, f"decode-{i}")
            if not result.ok or result.tpot_s is None:
                raise BenchmarkError(f"{url}: decode request {i + 1} failed ({result.error or 'no token times'})")
            tpots.append(result.tpot_s * 1e3)
    return tpots


def measure_decode_rate(url: str, requests: int = 5, max_tokens: int = 256) -> DecodeRate:
    """Plain decoding at one stream on the server at ``url`` (it must serve without speculation)."""
    if requests < 1 or max_tokens < 2:
        raise BenchmarkError("a decode measurement needs at least one request of at least two tokens")
    tpots = asyncio.run(_measure(url, requests, max_tokens))
    return DecodeRate(1e3 / statistics.median(tpots), tpots, url, max_tokens)
