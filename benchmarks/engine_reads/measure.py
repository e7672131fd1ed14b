"""What the engine really runs, on one GPU (issue #72): SGLang servers of the shapes of ``make_models.py`` with random
weights, measured by what they do, not by what a model says they do.

``context``: per shape (dense, MLA), attention backend (triton, flashinfer) and mode (plain decoding; an EAGLE-3
chain of 4 draft tokens with SGLang holding the accept length at 3), C streams of L tokens of distinct random
context decode together; the step (or verify cycle) time is read from the window in which all C stream (after the
last prefill, before the first finish). One JSON line per cell in ``STATE/context.jsonl``; a cell stored is never
measured again (a call stopped at its limit resumes).

``experts``: a Qwen3-30B-A3B-shaped MoE (8 layers) with SGLang's expert-distribution recorder (``per_token``):
plain decoding at 8-512 streams sampled at temperature 1, then an EAGLE-3 chain (4 draft tokens, accept held at 3,
accepted tokens the draft's own, draft ``fc`` zeroed so a chain's tokens vary: ``site/sitecustomize.py``) at 8-128
streams. Per target pass and layer: tokens, distinct token ids, distinct experts (``STATE/experts.csv``).

    python benchmarks/engine_reads/measure.py context --models M --state S --deadline-s 520
    python benchmarks/engine_reads/measure.py experts --models M --state S --deadline-s 520
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
from verifylab.launch import SglangLaunch, build_command  # noqa: E402
from verifylab.store.evidence import Evidence  # noqa: E402

SGLANG = "0.5.17"
PORT = 30000
URL = f"http://127.0.0.1:{PORT}"
SITE = Path(__file__).resolve().parent / "site"
DRAFT_TOKENS = 4
ACCEPT = 3.0
CONTEXTS = (2048, 16384, 32768, 65536)
STREAMS = (1, 4, 16)
VOCAB_LOW, VOCAB_HIGH = 3, 1023  # past the tokenizer's three special tokens
PLAIN_TOKENS, SPEC_TOKENS = 128, 192
EXPERT_PLAIN = (8, 32, 128, 512)
EXPERT_SPEC = (8, 32, 128)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def server_command(
    models: Path, shape: str, backend: str, spec: bool, extra: tuple[str, ...], env: dict[str, str], max_running: int
) -> tuple[list[str], dict[str, str]]:
    """The server's argv and environment, built by verifylab's one launch builder for SGLang 0.5.17."""
    fields = dict(
        model_path=str(models / shape / "target"),
        tp_size=1,
        host="127.0.0.1",
        port=PORT,
        mem_fraction_static=0.85,
        attention_backend=backend.split("-")[0],  # triton-splitkv: Triton, its split-KV gate lifted (site/)
        max_running_requests=max_running,
        extra_args=(
            "--load-format",
            "dummy",
            "--sampling-backend",
            "pytorch",
            "--skip-server-warmup",
            "--context-length",
            "131072",
            *extra,
        ),
        env=env,
    )
    if spec:
        launch = SglangLaunch.speculative("EAGLE3", DRAFT_TOKENS, str(models / shape / "draft"), **fields)
        launch = launch.model_copy(
            update={"extra_args": (*launch.extra_args, "--speculative-draft-load-format", "dummy")}
        )
    else:
        launch = SglangLaunch(**fields)
    command = build_command(launch, Evidence(ROOT / "data").launch_target(SGLANG))
    environment = {**os.environ, **dict(command.env)}
    for name in command.unset:
        environment.pop(name, None)
    environment["PYTHONPATH"] = os.pathsep.join([str(SITE), environment.get("PYTHONPATH", "")])
    if backend == "triton-splitkv":  # the fixture's switch (site/sitecustomize.py), not an SGLang variable
        environment["VERIFYLAB_READS_SPLITKV"] = "1"
    return command.argv([sys.executable, "-m", "sglang.launch_server"]), environment


class Server:
    """One SGLang server process in its own session, its output in ``log_path``; stopped (the whole group) on exit."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.out = log_path.open("w")
        self.out.write(" ".join(argv) + "\n")
        self.out.flush()
        self.proc = subprocess.Popen(argv, env=env, stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            try:
                if httpx.get(f"{URL}/health_generate", timeout=5).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(2)
        return False

    def info(self) -> dict:
        try:
            return httpx.get(f"{URL}/get_server_info", timeout=10).json()
        except (httpx.HTTPError, ValueError):
            return {}

    def tail(self, lines: int = 12) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.out.close()
        subprocess.run(["pkill", "-9", "-f", "sglang.launch_server"], check=False)
        time.sleep(2)


def find_key(obj, key: str):
    """The first value of ``key`` anywhere in a JSON object."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for item in obj:
            found = find_key(item, key)
            if found is not None:
                return found
    return None


async def stream_one(client: httpx.AsyncClient, ids: list[int], tokens: int, temperature: float) -> dict:
    """One streamed request: (time, completion tokens) per chunk, and its last meta_info."""
    body = {
        "input_ids": ids,
        "stream": True,
        "sampling_params": {"max_new_tokens": tokens, "temperature": temperature, "ignore_eos": True},
    }
    marks, meta = [], {}
    async with client.stream("POST", f"{URL}/generate", json=body, timeout=600) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            meta = json.loads(line[5:]).get("meta_info", {})
            marks.append((time.monotonic(), int(meta.get("completion_tokens", 0))))
    return {"marks": marks, "meta": meta}


async def run_streams(prompts: list[list[int]], tokens: int, temperature: float = 0.0) -> list[dict]:
    limits = httpx.Limits(max_connections=len(prompts) + 4)
    async with httpx.AsyncClient(limits=limits) as client:
        return await asyncio.gather(*(stream_one(client, p, tokens, temperature) for p in prompts))


def tokens_at(marks: list[tuple[float, int]], t: float) -> float:
    """Completion tokens a stream had at time ``t`` (the last chunk at or before it)."""
    count = 0
    for when, n in marks:
        if when > t:
            break
        count = n
    return float(count)


def window_of(results: list[dict]) -> dict:
    """The window in which every stream decodes: from the last stream's first chunk to the first stream's last."""
    start = max(r["marks"][0][0] for r in results)
    end = min(r["marks"][-1][0] for r in results)
    made = sum(tokens_at(r["marks"], end) - tokens_at(r["marks"], start) for r in results)
    verify = [r["meta"].get("spec_verify_ct") for r in results]
    completion = [r["meta"].get("completion_tokens") for r in results]
    accept = None
    if all(v for v in verify):
        accept = sum(completion) / sum(verify)
    return {
        "window_s": end - start,
        "tokens_in_window": made,
        "accept_length": accept,
        "completion_tokens": sum(completion),
    }


def random_prompts(streams: int, length: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(VOCAB_LOW, VOCAB_HIGH) for _ in range(length)] for _ in range(streams)]


def done_cells(path: Path) -> set[tuple]:
    if not path.exists():
        return set()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {tuple(r["cell"]) for r in rows if r.get("window_s", 1.0) > 0}  # a cell with no common window: again


def append(path: Path, row: dict) -> None:
    with path.open("a") as out:
        out.write(json.dumps(row) + "\n")


def context_grid(
    models: Path,
    state: Path,
    deadline: float,
    only: list[str] | None,
    contexts: tuple[int, ...] = CONTEXTS,
    streams_grid: tuple[int, ...] = STREAMS,
    shapes: tuple[str, ...] = ("dense", "mla"),
    backends: tuple[str, ...] = ("triton", "flashinfer"),
) -> None:
    out = state / "context.jsonl"
    done = done_cells(out)
    plans = [(shape, backend, spec) for backend in backends for shape in shapes for spec in (False, True)]
    for shape, backend, spec in plans:
        mode = "eagle3" if spec else "plain"
        server_id = f"{shape}-{backend}-{mode}"
        if only and not any(server_id.startswith(o) for o in only):
            continue
        cells = [(server_id, length, streams) for length in contexts for streams in streams_grid]
        todo = [c for c in cells if c not in done]
        if not todo:
            continue
        if time.monotonic() > deadline - 120:
            log(f"stopping before {server_id}: too little time left in this call")
            return
        env = {"SGLANG_SIMULATE_ACC_LEN": str(ACCEPT)} if spec else {}
        argv, environment = server_command(
            models,
            shape,
            backend,
            spec,
            ("--cuda-graph-bs", *map(str, streams_grid), "--cuda-graph-max-bs", "16"),
            env,
            max_running=16,
        )
        log(f"starting {server_id}")
        started = time.monotonic()
        server = Server(argv, environment, state / "logs" / f"{server_id}.log")
        try:
            if not server.wait_ready(min(300.0, deadline - time.monotonic() - 30)):
                log(f"{server_id} did not start:\n{server.tail()}")
                append(out, {"cell": [server_id, 0, 0], "server": server_id, "failed": server.tail(20)})
                continue
            info = server.info()
            pool = find_key(info, "max_total_num_tokens")
            if pool is None:
                found = re.search(r"max_total_num_tokens=(\d+)", server.log_path.read_text(errors="replace"))
                pool = int(found.group(1)) if found else None
            start_s = time.monotonic() - started
            log(f"{server_id} ready in {start_s:.0f} s (KV pool {pool} tokens)")
            for cell in todo:
                _, length, streams = cell
                if time.monotonic() > deadline - 25:
                    log("stopping: the call's time is nearly up")
                    return
                prompts = random_prompts(streams, length, seed=zlib.crc32(repr(cell).encode()))
                tokens = SPEC_TOKENS if spec else PLAIN_TOKENS
                t0 = time.monotonic()
                asyncio.run(run_streams(prompts, 1))  # prefill once: the timed round finds the prompts cached
                results = asyncio.run(run_streams(prompts, tokens))
                window = window_of(results)
                row = {
                    "cell": list(cell),
                    "server": server_id,
                    "shape": shape,
                    "backend": backend,
                    "mode": mode,
                    "context": length,
                    "streams": streams,
                    "kv_pool_tokens": pool,
                    "server_start_s": start_s,
                    "cell_s": time.monotonic() - t0,
                    **window,
                }
                append(out, row)
                per_step = window["window_s"] / max(window["tokens_in_window"] / streams, 1e-9)
                log(
                    f"  {server_id} L={length} C={streams}: window {window['window_s']:.2f} s, "
                    f"{per_step * 1e3:.3f} ms per token per stream, accept {window['accept_length']}"
                )
        finally:
            server.stop()


def expert_records(dump_dir: Path) -> list[dict]:
    import torch
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    rows = []
    for path in sorted(dump_dir.glob("*.pt")):
        data = torch.load(path, weights_only=False)
        for record in data["records"]:
            mode = ForwardMode(record["forward_mode"]).name
            ids = record["input_ids"]
            topk = record["topk_ids_of_layer"]  # layers x tokens x 8
            for layer in range(topk.shape[0]):
                picked = topk[layer]
                picked = picked[picked >= 0]
                if picked.numel() == 0:
                    continue
                rows.append(
                    {
                        "pass": record["forward_pass_id"],
                        "forward_mode": mode,
                        "tokens": len(ids),
                        "distinct_tokens": len(set(ids)),
                        "layer": layer,
                        "distinct_experts": int(picked.unique().numel()),
                        "input_ids": ids,
                    }
                )
    return rows


def expert_count(models: Path, state: Path, deadline: float) -> None:
    import csv

    out = state / "experts.csv"
    chains_out = state / "expert_chains.jsonl"
    done = set()
    if out.exists():
        done = {(r["server"], int(r["streams"])) for r in csv.DictReader(out.open())}
    fields = ["server", "streams", "pass", "forward_mode", "tokens", "distinct_tokens", "layer", "distinct_experts"]
    for spec in (False, True):
        server_id = "moe-triton-" + ("eagle3" if spec else "plain")
        counts = EXPERT_SPEC if spec else EXPERT_PLAIN
        todo = [c for c in counts if (server_id, c) not in done]
        if not todo:
            continue
        if time.monotonic() > deadline - 150:
            log(f"stopping before {server_id}: too little time left in this call")
            return
        dump_dir = state / "expert-dumps" / server_id
        env = {"SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR": str(dump_dir)}
        if spec:
            env |= {
                "SGLANG_SIMULATE_ACC_LEN": str(ACCEPT),
                "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token",
                "VERIFYLAB_READS_DRAFT_VARIES": "1",
            }
        argv, environment = server_command(
            models,
            "moe",
            "triton",
            spec,
            ("--expert-distribution-recorder-mode", "per_token", "--disable-cuda-graph"),
            env,
            max_running=512,
        )
        log(f"starting {server_id}")
        server = Server(argv, environment, state / "logs" / f"{server_id}.log")
        try:
            if not server.wait_ready(min(400.0, deadline - time.monotonic() - 30)):
                log(f"{server_id} did not start:\n{server.tail()}")
                return
            for streams in todo:
                if time.monotonic() > deadline - 40:
                    log("stopping: the call's time is nearly up")
                    return
                shutil.rmtree(dump_dir, ignore_errors=True)
                httpx.post(f"{URL}/start_expert_distribution_record", timeout=60)
                prompts = random_prompts(streams, 32, seed=streams)
                asyncio.run(run_streams(prompts, 24 if spec else 12, temperature=1.0))
                httpx.post(f"{URL}/stop_expert_distribution_record", timeout=60)
                httpx.post(f"{URL}/dump_expert_distribution_record", timeout=300)
                rows = expert_records(dump_dir)
                wanted = "TARGET_VERIFY" if spec else "DECODE"
                kept = [r for r in rows if r["forward_mode"] == wanted]
                new = not out.exists()
                with out.open("a", newline="") as handle:
                    writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
                    if new:
                        writer.writeheader()
                    for r in kept:
                        writer.writerow({"server": server_id, "streams": streams, **r})
                if spec:  # the verified chains' tokens, once per pass (layer 0)
                    with chains_out.open("a") as handle:
                        for r in kept:
                            if r["layer"] == 0:
                                handle.write(
                                    json.dumps({"streams": streams, "pass": r["pass"], "input_ids": r["input_ids"]})
                                    + "\n"
                                )
                full = [r for r in kept if r["tokens"] == streams * (DRAFT_TOKENS if spec else 1)]
                mean = sum(r["distinct_experts"] for r in full) / max(len(full), 1)
                log(
                    f"  {server_id} C={streams}: {len(kept)} {wanted} layer-passes ({len(full)} full), "
                    f"mean distinct experts {mean:.1f}"
                )
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("context", "experts", "experts+context"))
    parser.add_argument("--models", type=Path, required=True, help="folder of make_models.py's output")
    parser.add_argument("--state", type=Path, required=True, help="folder kept across calls (results, logs)")
    parser.add_argument("--deadline-s", type=float, default=520.0, help="stop starting work after this many seconds")
    parser.add_argument("--only", nargs="*", help="context: only servers whose id starts with one of these")
    parser.add_argument("--contexts", default=",".join(map(str, CONTEXTS)), help="context: prompt lengths")
    parser.add_argument("--streams", default=",".join(map(str, STREAMS)), help="context: stream counts")
    parser.add_argument("--shapes", default="dense,mla", help="context: targets of make_models.py (mla36: 36 layers)")
    parser.add_argument(
        "--backends", default="triton,flashinfer", help="context: triton, flashinfer, triton-splitkv (the gate lifted)"
    )
    args = parser.parse_args()
    args.state.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.deadline_s
    if args.what.startswith("experts"):
        expert_count(args.models, args.state, deadline)
    if args.what.endswith("context"):
        context_grid(
            args.models,
            args.state,
            deadline,
            args.only,
            tuple(int(x) for x in args.contexts.split(",")),
            tuple(int(x) for x in args.streams.split(",")),
            tuple(args.shapes.split(",")),
            tuple(args.backends.split(",")),
        )


if __name__ == "__main__":
    main()
