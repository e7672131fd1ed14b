"""How the benchmark client measures against a real server: TTFT of a cell's first wave, and the client's CPU per
token, for verifylab's client (cold: as sweeps ran before #42; warm: as they run now) against two minimal
streaming clients of the same requests (aiohttp, the reference; httpx), each with its connections opened first.

    python benchmarks/client_fidelity/live.py --url http://127.0.0.1:30000 --out /tmp/out [--cells 16:32,64:128]

Each (client, cell) is measured twice, interleaved, on the same server; the script prints the medians and the
ratio of each client's TTFT and CPU per token to the minimal aiohttp client's measured in the same run, and writes
``client_fidelity.json``. Speed only: nothing here enters data/ or the book.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from verifylab.bench.client import Client  # noqa: E402
from verifylab.bench.method import sweep_cell  # noqa: E402
from verifylab.bench.prompts import load_prompts  # noqa: E402


def body(prompt: str, tokens: int) -> dict:
    return {
        "text": prompt,
        "stream": True,
        "sampling_params": {"max_new_tokens": tokens, "temperature": 0.0, "ignore_eos": True},
    }


def completion_tokens(line: bytes) -> int | None:
    payload = line[len(b"data:") :].strip()
    if not payload or payload == b"[DONE]":
        return None
    return int(json.loads(payload).get("meta_info", {}).get("completion_tokens", 0))


async def closed_loop(one, concurrency: int, requests: int) -> list[tuple[float, int]]:
    """``requests`` calls of ``one(i)`` (each returns (ttft s, tokens)), ``concurrency`` at a time."""
    queue = iter(range(requests))
    out: list[tuple[float, int]] = []

    async def worker() -> None:
        for i in queue:
            out.append(await one(i))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def minimal_aiohttp(url: str, prompts: list[str], c: int, n: int, tokens: int) -> list[tuple[float, int]]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(i: int, max_tokens: int = tokens) -> tuple[float, int]:
            start, ttft, count = time.perf_counter(), 0.0, 0
            async with session.post(url + "/generate", json=body(prompts[i % len(prompts)], max_tokens)) as resp:
                async for line in resp.content:
                    if line.startswith(b"data:"):
                        got = completion_tokens(line)
                        if got:
                            ttft = ttft or time.perf_counter() - start
                            count = got
            return ttft, count

        await asyncio.gather(*(one(i, 1) for i in range(c)))  # open the cell's connections first
        return await closed_loop(one, c, n)


async def minimal_httpx(url: str, prompts: list[str], c: int, n: int, tokens: int) -> list[tuple[float, int]]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=600) as client:

        async def one(i: int, max_tokens: int = tokens) -> tuple[float, int]:
            start, ttft, count = time.perf_counter(), 0.0, 0
            payload = body(prompts[i % len(prompts)], max_tokens)
            async with client.stream("POST", url + "/generate", json=payload) as resp:
                async for line in resp.aiter_lines():
                    if line.startswith("data:"):
                        got = completion_tokens(line.encode())
                        if got:
                            ttft = ttft or time.perf_counter() - start
                            count = got
            return ttft, count

        await asyncio.gather(*(one(i, 1) for i in range(c)))
        return await closed_loop(one, c, n)


async def verifylab_client(url: str, c: int, n: int, tokens: int, warm: bool) -> list[tuple[float, int]]:
    async with Client(url) as client:
        if not warm:  # as sweeps ran before the warm-up: the first wave opens the connections
            client.warm = _no_warm  # type: ignore[method-assign]
        results, _ = await sweep_cell(client, c, n, tokens, load_prompts())
    return [(r.ttft_s or 0.0, r.output_tokens) for r in results]


async def _no_warm(connections: int) -> None:
    return None


def measure(name: str, url: str, c: int, n: int, tokens: int) -> dict:
    texts = [p.text for p in load_prompts()]
    runners = {
        "verifylab (cold, before #42)": lambda: verifylab_client(url, c, n, tokens, warm=False),
        "verifylab (warm)": lambda: verifylab_client(url, c, n, tokens, warm=True),
        "minimal aiohttp": lambda: minimal_aiohttp(url, texts, c, n, tokens),
        "minimal httpx": lambda: minimal_httpx(url, texts, c, n, tokens),
    }
    cpu0, wall0 = time.process_time(), time.perf_counter()
    rows = asyncio.run(runners[name]())
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    got = sum(t for _, t in rows)
    first_wave = [ttft for ttft, _ in rows[:c]]
    return {
        "client": name,
        "streams": c,
        "requests": n,
        "median_ttft_ms": 1e3 * statistics.median(ttft for ttft, _ in rows),
        "median_first_wave_ttft_ms": 1e3 * statistics.median(first_wave),
        "client_cpu_ms_per_token": 1e3 * cpu / max(got, 1),
        "tokens": got,
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cells", default="16:32,64:128", help="streams:requests, comma-separated")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    names = ["minimal aiohttp", "verifylab (cold, before #42)", "verifylab (warm)", "minimal httpx"]
    rows = []
    for c, n in (tuple(map(int, cell.split(":"))) for cell in args.cells.split(",")):
        for repeat in range(args.repeats):
            for name in names:
                row = measure(name, args.url, c, n, args.tokens) | {"repeat": repeat}
                rows.append(row)
                print(json.dumps(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "client_fidelity.json").write_text(json.dumps(rows, indent=2))
    print(f"\n{'client':32} {'C':>4} {'TTFT ms':>9} {'x ref':>6} {'1st wave':>9} {'CPU ms/tok':>11} {'x ref':>6}")
    for c in sorted({r["streams"] for r in rows}):
        med = {
            name: {
                key: statistics.median(r[key] for r in rows if r["client"] == name and r["streams"] == c)
                for key in ("median_ttft_ms", "median_first_wave_ttft_ms", "client_cpu_ms_per_token")
            }
            for name in names
        }
        ref = med["minimal aiohttp"]
        for name in names:
            m = med[name]
            print(
                f"{name:32} {c:>4} {m['median_ttft_ms']:>9.1f} {m['median_ttft_ms'] / ref['median_ttft_ms']:>6.2f} "
                f"{m['median_first_wave_ttft_ms']:>9.1f} {m['client_cpu_ms_per_token']:>11.3f} "
                f"{m['client_cpu_ms_per_token'] / ref['client_cpu_ms_per_token']:>6.2f}"
            )


if __name__ == "__main__":
    main()
