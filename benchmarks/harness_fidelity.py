"""How faithfully does the benchmark client measure? Test double at known rates, 1 and 64 streams.

    python benchmarks/harness_fidelity.py [--streams 1,64] [--tokens 512] [--step-ms 20] [--tokens-per-step 2]

The test double (a separate process) emits 2 tokens every 20 ms on an absolute schedule: 100 tok/s per
stream, 10 ms per token. Each chunk also carries the server's own send time, so every request has a *true*
TTFT, E2E and TPOT (what the server did) next to the *nominal* ones (its schedule). For each stream count
the script prints measured / true for TPOT, E2E and inter-token latency, measured / nominal throughput, and
the client's CPU time per token (the client process's CPU seconds over the tokens it received).
Targets: TPOT and E2E within 0.3 % of true at 64 streams; client CPU under 0.35 ms per token.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from verifylab.bench.client import Client  # noqa: E402
from verifylab.server import http  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def cell(url: str, streams: int, tokens: int) -> tuple[list, float]:
    async with Client(url) as client:
        # warm the keep-alive pool with as many connections as the cell uses (as a real benchmark's warm-up does)
        await asyncio.gather(*(client.generate("warm-up", 4) for _ in range(streams)))
        cpu0 = time.process_time()
        results = await asyncio.gather(*(client.generate("fidelity", tokens, f"r{i}") for i in range(streams)))
        return list(results), time.process_time() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="1,64")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--tokens-per-step", type=int, default=2)
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "verifylab.testing.server",
            "--port",
            str(port),
            "--step-ms",
            str(args.step_ms),
            "--tokens-per-step",
            str(args.tokens_per_step),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if http.request(url + "/health_generate", 1.0)[0] == 200:
                    break
            except http.HttpError:
                time.sleep(0.1)
        nominal_tpot = args.step_ms / 1e3 / args.tokens_per_step
        steps = -(-args.tokens // args.tokens_per_step)
        nominal_e2e = args.step_ms / 1e3 * steps  # prefill = one step, then steps - 1 more
        print(
            f"test double: {args.tokens_per_step} tokens / {args.step_ms:g} ms = "
            f"{1000 * args.tokens_per_step / args.step_ms:.0f} tok/s per stream, {args.tokens} tokens per request"
        )
        print(
            f"{'streams':>7} {'TPOT m/true':>12} {'E2E m/true':>11} {'ITL m/nominal':>14} {'tok/s m/nominal':>16} "
            f"{'server lag':>11} {'client CPU/token':>17}"
        )
        for streams in (int(s) for s in args.streams.split(",")):
            results, cpu_s = asyncio.run(cell(url, streams, args.tokens))
            bad = [r.error for r in results if not r.ok]
            if bad:
                raise SystemExit(f"{len(bad)} failed requests: {bad[:2]}")
            tpot_ratio, e2e_ratio, itl_ratio, tput_ratio, lag = [], [], [], [], []
            for r in results:
                true_e2e = r.meta["test_double_elapsed_s"]
                true_ttft = r.first_meta["test_double_elapsed_s"]
                true_tpot = (true_e2e - true_ttft) / (r.output_tokens - 1)
                tpot_ratio.append(r.tpot_s / true_tpot)
                e2e_ratio.append(r.e2e_s / true_e2e)
                itl_ratio.append(np.median(r.per_token_latency_s) / nominal_tpot)
                tput_ratio.append(r.output_tokens_per_s / (args.tokens / nominal_e2e))
                lag.append(true_e2e - nominal_e2e)
            tokens = sum(r.output_tokens for r in results)
            print(
                f"{streams:>7} {np.mean(tpot_ratio):>12.5f} {np.mean(e2e_ratio):>11.5f} {np.mean(itl_ratio):>14.5f} "
                f"{np.mean(tput_ratio):>16.5f} {np.mean(lag) * 1e3:>9.2f}ms {cpu_s / tokens * 1e3:>14.4f} ms"
            )
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
