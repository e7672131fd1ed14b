"""A stand-in for ``sglang.launch_server`` for tests and harness benchmarks (a test double).

It accepts SGLang-style launch flags (``--help`` lists them, so the launcher's flag check works against it),
serves the endpoints verifylab's client uses with SGLang's response shapes, and emits ``tokens_per_step``
tokens every ``step_ms`` on an absolute schedule, so the true rates are known exactly:
TPOT = step_ms / tokens_per_step, tokens/s per stream = 1000 x tokens_per_step / step_ms.
Faults on request: ``--fault 500|drop|malformed|stall|keepalive`` after ``--fault-after`` requests (keepalive:
SSE comments every 0.2 s and no token).

    python -m verifylab.testing.server --port 30000 --step-ms 20 --tokens-per-step 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import weakref
from pathlib import Path

from aiohttp import web

from verifylab.testing.fake_trace import write_fake_trace

FLAGS = {  # flag -> takes a value; a recent SGLang's spelling
    "--model-path": True,
    "--tp-size": True,
    "--host": True,
    "--port": True,
    "--mem-fraction-static": True,
    "--attention-backend": True,
    "--kv-cache-dtype": True,
    "--flashinfer-allreduce-fusion-backend": True,
    "--enforce-disable-flashinfer-allreduce-fusion": False,
    "--speculative-algorithm": True,
    "--speculative-draft-model-path": True,
    "--speculative-num-steps": True,
    "--speculative-eagle-topk": True,
    "--speculative-num-draft-tokens": True,
    "--speculative-ngram-max-bfs-breadth": True,
    "--speculative-ngram-min-bfs-breadth": True,
    "--max-running-requests": True,
    "--trust-remote-code": False,
    "--disable-cuda-graph": False,
    "--cuda-graph-max-bs-decode": True,
    "--log-level": True,
    "--api-key": True,
    # test-double controls
    "--step-ms": True,
    "--tokens-per-step": True,
    "--prefill-ms": True,
    "--fault": True,
    "--fault-after": True,
    "--log-line": True,
    "--exit-with": True,
    "--startup-ms": True,
    "--connect-ms": True,  # the first request on each new connection waits this long (a client's cold start)
    "--ignore-accept": False,  # a liar: ignores SGLANG_SIMULATE_ACC_LEN and accepts one token per verify
    "--lie-after": True,  # a later liar: honours the accept length for N requests, then accepts one token per verify
    "--no-verify-count": False,  # reports no spec_verify_ct: its accept length cannot be checked
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="verifylab.testing.server", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for flag, takes_value in FLAGS.items():
        if takes_value:
            parser.add_argument(flag, default=None)
        else:
            parser.add_argument(flag, action="store_true")
    return parser.parse_args(argv)


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.step = float(args.step_ms or 20.0) / 1e3
        self.prefill = float(args.prefill_ms) / 1e3 if args.prefill_ms else self.step
        self.per_step = int(args.tokens_per_step or 1)
        self.connect_s = float(args.connect_ms or 0) / 1e3
        self.warm_transports: weakref.WeakSet = weakref.WeakSet()
        # like SGLang's SGLANG_SIMULATE_ACC_LEN under speculation: the mean tokens per verify, floor and ceiling
        # mixed ("match-expected"); here deterministically, so a request's count is exact
        simulated = os.environ.get("SGLANG_SIMULATE_ACC_LEN")
        self.simulated_accept = float(simulated) if simulated and args.speculative_algorithm else None
        if args.ignore_accept:
            self.simulated_accept = None
        self.fault = args.fault
        self.fault_after = int(args.fault_after or 0)
        # PCIe-IPC enabled at start-up, its workspace failing on the first request (after the server said it was ready)
        self.pcie_ipc_fails_late = (
            os.environ.get("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE") == "1"
            and int(args.tp_size or 1) > 1
            and os.environ.get("VERIFYLAB_SIMULATE_PCIE_IPC_FAILS_LATE") == "1"
        )
        self.lie_after = int(args.lie_after) if args.lie_after else None
        self.reports_verifies = not args.no_verify_count
        self.requests = 0
        self.accepted = 0
        self.verifies = 0
        self.fusion_in_effect = bool(
            args.flashinfer_allreduce_fusion_backend
            and int(args.tp_size or 1) > 1
            and os.environ.get("VERIFYLAB_SIMULATE_NO_MULTICAST") != "1"
        )
        spec = args.speculative_algorithm
        self.server_args = {
            "model_path": args.model_path or "test-double",
            "tp_size": int(args.tp_size or 1),
            "port": int(args.port or 30000),
            "speculative_algorithm": spec,
            "speculative_num_draft_tokens": int(args.speculative_num_draft_tokens or 0) or None,
            "flashinfer_allreduce_fusion_backend": args.flashinfer_allreduce_fusion_backend,
            "enforce_disable_flashinfer_allreduce_fusion": bool(args.enforce_disable_flashinfer_allreduce_fusion),
        }

    def fault_now(self) -> str | None:
        return self.fault if self.fault and self.requests > self.fault_after else None


def tokens_per_step(state: State, max_new: int) -> list[int]:
    """How many tokens each step of a request yields: ``tokens_per_step`` each, or under a simulated accept length
    A the floor or ceiling of A so that the running mean stays on A (the last step takes what is left)."""
    lying = state.lie_after is not None and state.requests > state.lie_after
    per_step = 1.0 if lying and state.simulated_accept else state.simulated_accept or float(state.per_step)
    out: list[int] = []
    while sum(out) < max_new:
        due = int((len(out) + 1) * per_step + 1e-9) - int(len(out) * per_step + 1e-9)
        out.append(max(1, min(due, max_new - sum(out))))
    return out


def _meta(state: State, prompt_tokens: int, completion: int, steps: int, finished: bool) -> dict:
    meta = {
        "id": "req",
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "cached_tokens": 0,
        "finish_reason": {"type": "length", "length": completion} if finished else None,
    }
    if state.server_args["speculative_algorithm"] and state.reports_verifies:
        meta["spec_verify_ct"] = steps
    return meta


async def generate(request: web.Request) -> web.StreamResponse:
    state: State = request.app["state"]
    body = await request.json()
    state.requests += 1
    if state.requests == 1 and state.pcie_ipc_fails_late:  # its workspace is sized on the first reduction: it failed
        print(
            "FlashInfer PCIe-IPC workspace (max_numel=4) failed: out of memory; leaving PCIe-IPC all-reduce off",
            flush=True,
        )
    fault = state.fault_now()
    if fault == "500":
        return web.json_response({"error": {"message": "injected internal error"}}, status=500)
    params = body.get("sampling_params") or {}
    max_new = int(params.get("max_new_tokens", 16))
    prompt = body.get("text") or ""
    ids = body.get("input_ids")
    prompt_tokens = len(ids) if isinstance(ids, list) and ids else max(1, len(str(prompt).split()))
    stream = bool(body.get("stream"))
    start = time.perf_counter()
    schedule = tokens_per_step(state, max_new)
    steps = len(schedule)
    if not stream:
        await asyncio.sleep(state.prefill + (steps - 1) * state.step)
        state.accepted += max_new
        state.verifies += steps
        text = " ".join(f"t{i}" for i in range(max_new))
        return web.json_response(
            {
                "text": text,
                "output_ids": list(range(max_new)),
                "meta_info": _meta(state, prompt_tokens, max_new, steps, True),
            }
        )
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    produced = 0
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for i in range(steps):
        due = t0 + state.prefill + i * state.step
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        new = schedule[i]
        produced += new
        if fault == "drop" and i == 2:
            if request.transport is not None:
                request.transport.close()  # connection dropped mid-stream
            return resp
        if fault == "malformed" and i == 2:
            await resp.write(b"data: {not json\n\n")
            continue
        if fault == "stall" and i == 2:
            await asyncio.sleep(3600)
        if fault == "keepalive" and i == 2:  # bytes keep coming, tokens do not
            for _ in range(18000):
                await resp.write(b": keep-alive\n\n")
                await asyncio.sleep(0.2)
        meta = _meta(state, prompt_tokens, produced, i + 1, produced >= max_new)
        meta["test_double_elapsed_s"] = time.perf_counter() - start  # when the server sent it (fidelity checks)
        chunk = {
            "text": " ".join(f"t{j}" for j in range(produced)),
            "output_ids": list(range(produced)),
            "meta_info": meta,
        }
        await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    state.accepted += produced
    state.verifies += steps
    return resp


async def completions(request: web.Request) -> web.StreamResponse:
    state: State = request.app["state"]
    body = await request.json()
    max_new = int(body.get("max_tokens", 16))
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    steps = -(-max_new // state.per_step)
    produced = 0
    for i in range(steps):
        delay = t0 + state.prefill + i * state.step - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        new = min(state.per_step, max_new - produced)
        produced += new
        chunk = {
            "id": "cmpl",
            "object": "text_completion",
            "choices": [{"index": 0, "text": " t" * new, "finish_reason": "length" if produced >= max_new else None}],
        }
        await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    usage = {
        "id": "cmpl",
        "choices": [],
        "usage": {"prompt_tokens": 8, "completion_tokens": produced, "total_tokens": produced + 8},
    }
    await resp.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
    return resp


async def health(request: web.Request) -> web.Response:
    return web.Response(text="")


async def server_info(request: web.Request) -> web.Response:
    state: State = request.app["state"]
    accept = state.accepted / state.verifies if state.verifies else None
    return web.json_response(
        {**state.server_args, "version": "test-double", "internal_states": [{"avg_spec_accept_length": accept}]}
    )


async def flush_cache(request: web.Request) -> web.Response:
    state: State = request.app["state"]
    state.accepted = state.verifies = 0
    return web.Response(text="Cache flushed.")


async def start_profile(request: web.Request) -> web.Response:
    """Like SGLang: write one trace per rank into ``output_dir`` (here a tiny fake CUDA-graph trace)."""
    body = await request.json() if request.can_read_body else {}
    folder = body.get("output_dir")
    if folder:
        state: State = request.app["state"]
        steps = int(body.get("num_steps") or 1)
        fused = state.fusion_in_effect
        for rank in range(state.server_args["tp_size"]):
            write_fake_trace(Path(folder) / f"test-double-TP-{rank}.trace.json.gz", steps, fused=fused)
    return web.Response(text="Start profiling.")


TEST_DOUBLE_HEADER = "X-Verifylab-Test-Double"


@web.middleware
async def cold_connections(request: web.Request, handler):
    """The first request on a connection waits ``--connect-ms``: what a client that opens its connections as
    the first wave starts pays before the server sees the request."""
    state: State = request.app["state"]
    transport = request.transport
    if state.connect_s and transport is not None and transport not in state.warm_transports:
        state.warm_transports.add(transport)
        await asyncio.sleep(state.connect_s)
    return await handler(request)


async def say_test_double(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer says it comes from the double (set before its headers go out): a run of it is never evidence."""
    response.headers[TEST_DOUBLE_HEADER] = "1"


def build_app(args: argparse.Namespace) -> web.Application:
    app = web.Application(middlewares=[cold_connections])
    app.on_response_prepare.append(say_test_double)
    app["state"] = State(args)
    app.router.add_post("/generate", generate)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/health_generate", health)
    app.router.add_get("/health", health)
    app.router.add_get("/server_info", server_info)
    app.router.add_get("/get_server_info", server_info)
    app.router.add_post("/flush_cache", flush_cache)
    app.router.add_post("/start_profile", start_profile)
    app.router.add_post("/stop_profile", start_profile)
    return app


def _log_collective(asked: bool, fails: str, fell_back: str, enabled: str) -> None:
    """A collective's start-up line as SGLang logs it, where it was asked for: ``fell_back`` when the double's
    ``fails`` variable is 1, else ``enabled``."""
    if asked:
        print(fell_back if os.environ.get(fails) == "1" else enabled, flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    for line in (args.log_line or "").split("||"):
        if line:
            print(line, flush=True)
    if args.exit_with:
        print(args.exit_with, file=sys.stderr, flush=True)
        raise SystemExit(1)
    if args.startup_ms:
        time.sleep(float(args.startup_ms) / 1e3)
    # like SGLang, which logs every server argument at start-up, its API key included
    print(
        f"server_args=ServerArgs(model_path={args.model_path!r}, api_key={args.api_key!r}, tp_size={args.tp_size}, "
        f"attention_backend={args.attention_backend!r}, kv_cache_dtype={args.kv_cache_dtype!r}, "
        f"cuda_graph_max_bs_decode={args.cuda_graph_max_bs_decode})"
    )
    tp = int(args.tp_size or 1)
    _log_collective(  # the lines SGLang 0.5.17 logs (flashinfer_comm_fusion.py): a preflight skip without multicast
        bool(args.flashinfer_allreduce_fusion_backend) and tp > 1,
        "VERIFYLAB_SIMULATE_NO_MULTICAST",
        "FlashInfer workspace preflight probe failed (cuMulticastGetGranularity failed for FlashInfer workspace "
        "preflight: CUDA_ERROR_NOT_SUPPORTED). Skipping allreduce fusion.",
        "FlashInfer AllReduce Fusion enabled and workspace initialized: backend=trtllm, rank=0, "
        f"world_size={args.tp_size}, max_token_num=2048, hidden_dim=7168",
    )
    _log_collective(  # the lines SGLang 0.5.22 logs (pcie_ipc_ar.py): a FlashInfer without the kernel falls back
        os.environ.get("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE") == "1" and tp > 1,
        "VERIFYLAB_SIMULATE_NO_PCIE_IPC",
        "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is set but this FlashInfer build has no pcie_ipc_comm; falling back to NCCL "
        "all-reduce.",
        f"FlashInfer PCIe-IPC all-reduce enabled (world={args.tp_size})",
    )
    print("The server is fired up and ready to roll!", flush=True)
    web.run_app(  # a stalled stream must not hold SIGTERM for aiohttp's default 60 s of graceful shutdown
        build_app(args),
        host=args.host or "127.0.0.1",
        port=int(args.port or 30000),
        print=None,
        access_log=None,
        shutdown_timeout=0.5,
    )


if __name__ == "__main__":
    main()
