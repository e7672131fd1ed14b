"""Run the synthetic verify pass on N ranks (one process each) and write one profiler trace per rank."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import statistics
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from verifylab.errors import ParameterError

STEP_PREFIX = "verify_step#"


class SynthConfig(BaseModel):
    """Parameters of ``verifylab synth-verify``."""

    backend: Literal["gloo", "nccl", "none"] = "gloo"
    ranks: int = Field(2, ge=1, le=64)
    tp: int | None = Field(
        None,
        ge=1,
        le=64,
        description="shard shapes of TP=tp (default: ranks). The all-reduce payload (k x hidden) does not depend on "
        "tp, so TP-8 shards can run on fewer ranks when 8 GPUs are not available",
    )
    layers: int = Field(61, ge=1, le=200)
    hidden: int = Field(7168, ge=16)
    tokens: int = Field(4, ge=1, le=4096)
    steps: int = Field(3, ge=1, le=1000)
    warmup: int = Field(1, ge=0)
    context: int = Field(2048, ge=1)
    fused_norm: bool = False
    cuda_graph: bool = True
    profile_dir: Path | None = None
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> SynthConfig:
        if self.backend == "gloo" and self.fused_norm:
            raise ValueError("fused_norm needs a GPU (FlashInfer): use --backend nccl or none on a GPU")
        if self.backend == "none" and self.ranks != 1:
            raise ValueError("backend 'none' runs one rank without communication: use --ranks 1")
        return self

    @property
    def on_gpu(self) -> bool:
        return self.backend == "nccl" or (self.backend == "none" and _cuda_available())


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _shape(cfg: SynthConfig):
    from verifylab.synth.shapes import KIMI_K2, ModelShape, ShardShape, small_shape

    model = (
        ModelShape(**{**KIMI_K2.to_dict(), "layers": cfg.layers})
        if cfg.hidden == 7168
        else small_shape(cfg.hidden, cfg.layers)
    )
    return ShardShape(model, cfg.tp or cfg.ranks)


def _worker(rank: int, cfg: SynthConfig, port: int, out_dir: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function

    from verifylab.synth import verify_pass as vp
    from verifylab.synth.cuda import capture_graph

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if cfg.backend != "none":
        dist.init_process_group(cfg.backend, rank=rank, world_size=cfg.ranks)
    gpu = cfg.on_gpu
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    dtype = torch.bfloat16 if gpu else torch.float32
    stack = vp.ShardStack(_shape(cfg), cfg.tokens, cfg.layers, cfg.context, cfg.seed + rank, device, dtype)
    allreduce = vp.identity_allreduce if cfg.backend == "none" else vp.dist_allreduce
    add_norm = vp.add_rmsnorm_flashinfer if cfg.fused_norm else vp.add_rmsnorm_unfused

    def step() -> None:
        stack.forward(allreduce, add_norm)

    for _ in range(cfg.warmup):
        step()
    if gpu and cfg.cuda_graph:
        graph = capture_graph(step)
        run = graph.replay
    else:
        run = step
    if gpu:
        torch.cuda.synchronize()
    if cfg.backend != "none":
        dist.barrier()

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    times_ms: list[float] = []
    with profile(activities=activities, record_shapes=False, with_stack=False) as prof:
        for i in range(cfg.steps):
            with record_function(f"{STEP_PREFIX}{i}"):
                start = time.perf_counter()
                run()
                if gpu:
                    torch.cuda.synchronize()
                times_ms.append((time.perf_counter() - start) * 1e3)
    raw = Path(out_dir) / f".rank{rank}.json"
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(Path(out_dir) / f"synth-TP-{rank}.trace.json.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    (Path(out_dir) / f".rank{rank}.times.json").write_text(json.dumps(times_ms))
    if cfg.backend != "none":
        dist.barrier()
        dist.destroy_process_group()


def run_synth_verify(cfg: SynthConfig) -> dict:
    """Spawn the ranks, write ``synth-TP-<rank>.trace.json.gz`` per rank, return per-rank step times."""
    import torch.multiprocessing as mp

    if cfg.backend == "nccl":
        import torch

        if torch.cuda.device_count() < cfg.ranks:
            raise ParameterError(f"--ranks {cfg.ranks} needs {cfg.ranks} GPUs; {torch.cuda.device_count()} visible")
    if cfg.profile_dir is None:
        raise ParameterError("--profile-dir is required: it receives one trace per rank")
    out = Path(cfg.profile_dir)
    out.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    if cfg.ranks == 1:
        _worker(0, cfg, port, str(out))
    else:
        mp.spawn(_worker, args=(cfg, port, str(out)), nprocs=cfg.ranks, join=True)
    times = {}
    for rank in range(cfg.ranks):
        marker = out / f".rank{rank}.times.json"
        times[rank] = json.loads(marker.read_text())
        marker.unlink()
    medians = [statistics.median(t) for t in times.values()]
    return {
        "config": cfg.model_dump(mode="json"),
        "traces": [str(out / f"synth-TP-{r}.trace.json.gz") for r in range(cfg.ranks)],
        "step_ms": times,
        "median_step_ms": max(medians),
    }
