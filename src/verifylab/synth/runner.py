"""Run the synthetic verify pass on N ranks (one process each) and write one profiler trace per rank.

Every rank records the phase it is in (``init``, ``build``, ``warmup``, ``capture``, ``profile``, ``export``,
``teardown``) in a sidecar; collectives time out after ``timeout`` seconds, and the parent ends every rank when
one fails or the deadline passes, with one error that names the rank and the phase. Sidecars are written
atomically and removed on every exit path; traces are written atomically (a trace present is complete).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import statistics
import time
from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from verifylab.errors import ParameterError, SynthError
from verifylab.iorw import atomic_path, atomic_write_text
from verifylab.lifetime import die_with
from verifylab.rendezvous import fresh_rendezvous, rendezvous_store
from verifylab.shapes import KIMI_K2, ModelShape, ShardShape, small_shape

STEP_PREFIX = "verify_step#"
SIDECAR_PREFIX = ".rank"


class SynthConfig(BaseModel):
    """Parameters of ``verifylab synth-verify``."""

    backend: Literal["gloo", "nccl", "none"] = "gloo"
    comm: Literal["allreduce", "fused", "compute_only"] = Field(
        "allreduce",
        description="allreduce: the backend's all-reduce (NCCL on GPUs, gloo on CPU), then the norm; fused: "
        "FlashInfer's all-reduce + residual + RMSNorm kernel as SGLang 0.5.17 calls it (NCCL, GPUs); "
        "compute_only: no communication at all (the floor)",
    )
    allreduces_per_layer: Literal[0, 1, 2] = Field(
        2, description="2: as SGLang runs a TP layer; 1 or 0: what removing those all-reduces saves (norms kept)"
    )
    norm: Literal["auto", "fused_kernel", "pytorch"] = Field(
        "auto",
        description="add+RMSNorm: fused_kernel = one FlashInfer kernel (SGLang's unfused path, GPU); pytorch = "
        "PyTorch's several kernels (a labelled extra); auto = fused_kernel on GPUs, pytorch on CPU",
    )
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
    cuda_graph: bool = True
    timeout: float = Field(300.0, gt=0, description="seconds any collective phase may take before all ranks end")
    profile_dir: Path | None = None
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> SynthConfig:
        if self.backend == "gloo" and (self.norm == "fused_kernel" or self.comm == "fused"):
            raise ValueError("FlashInfer kernels need GPUs: use --backend nccl (or norm pytorch / comm allreduce)")
        if self.comm == "fused" and self.backend != "nccl":
            raise ValueError("comm 'fused' is FlashInfer's all-reduce kernel across GPUs: use --backend nccl")
        if self.backend == "none" and self.ranks != 1:
            raise ValueError("backend 'none' runs one rank without communication: use --ranks 1")
        if self.comm == "fused" and self.allreduces_per_layer != 2:
            raise ValueError("comm 'fused' fuses every all-reduce: keep allreduces_per_layer 2")
        return self

    @property
    def on_gpu(self) -> bool:
        return self.backend == "nccl" or (self.backend == "none" and _cuda_available())

    def resolved_norm(self, on_gpu: bool) -> str:
        return ("fused_kernel" if on_gpu else "pytorch") if self.norm == "auto" else self.norm


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _shape(cfg: SynthConfig):
    """The model and its shard this configuration runs: Kimi-K2's at hidden 7168, else a small one."""
    model = (
        ModelShape(**{**KIMI_K2.to_dict(), "layers": cfg.layers})
        if cfg.hidden == 7168
        else small_shape(cfg.hidden, cfg.layers)
    )
    return ShardShape(model, cfg.tp or cfg.ranks)


def sidecar(out_dir: Path, rank: int, kind: str) -> Path:
    """The rank's ``.rank<r>.<kind>`` file in ``out_dir`` (phase, times, raw trace)."""
    return Path(out_dir) / f"{SIDECAR_PREFIX}{rank}.{kind}"


class Phases:
    """Records the rank's current phase (for the parent's error; the seam a test's fault launcher patches:
    ``verifylab.testing.faults``)."""

    def __init__(self, rank: int, out_dir: Path) -> None:
        self.rank, self.out = rank, out_dir

    def beat(self, step: int) -> None:
        """Progress inside a phase (a profiled step done): the parent's no-progress deadline starts again."""
        atomic_write_text(sidecar(self.out, self.rank, "beat"), str(step))

    def enter(self, phase: str) -> None:
        atomic_write_text(sidecar(self.out, self.rank, "phase"), phase)


def _comm(cfg: SynthConfig, rank: int, gpu: bool):
    """The per-layer communication of this configuration (see ``verify_pass.SeparateComm`` / ``FusedComm``)."""
    from verifylab.synth import verify_pass as vp

    norm = vp.add_rmsnorm_flashinfer if cfg.resolved_norm(gpu) == "fused_kernel" else vp.add_rmsnorm_unfused
    if cfg.comm == "fused":
        from verifylab.synth.flashinfer_fusion import FlashInferFusedAllReduce

        return vp.FusedComm(FlashInferFusedAllReduce(rank, cfg.ranks, cfg.hidden))
    if cfg.comm == "compute_only" or cfg.backend == "none":
        return vp.layer_comm(vp.identity_allreduce, norm, 0)
    return vp.layer_comm(vp.dist_allreduce, norm, cfg.allreduces_per_layer)


def _worker(
    rank: int, cfg: SynthConfig, rendezvous: str, out_dir: str, caller: tuple[int, dict[str, str]] | None = None
) -> None:
    if caller is not None:  # forked from the rank server: it ends with the caller, and sees the caller's environment
        pid, environ = caller
        die_with(pid)
        os.environ.clear()
        os.environ.update(environ)
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function

    from verifylab.synth import verify_pass as vp
    from verifylab.synth.cuda import capture_graph

    out = Path(out_dir)
    phases = Phases(rank, out)
    phases.enter("init")
    distributed = cfg.backend != "none"
    if distributed:
        timeout = timedelta(seconds=cfg.timeout)
        store = rendezvous_store(rendezvous, cfg.ranks, timeout)
        dist.init_process_group(cfg.backend, store=store, rank=rank, world_size=cfg.ranks, timeout=timeout)
    gpu = cfg.on_gpu
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    else:  # a rank is one device: with torch's default of a thread per core, ranks on a 2-core machine spun
        torch.set_num_threads(1)  # against each other and a step took 8 times as long
    phases.enter("build")
    dtype = torch.bfloat16 if gpu else torch.float32
    stack = vp.ShardStack(_shape(cfg), cfg.tokens, cfg.layers, cfg.context, cfg.seed + rank, device, dtype)
    comm = _comm(cfg, rank, gpu)

    def step() -> None:
        stack.forward(comm=comm)

    phases.enter("warmup")
    for _ in range(cfg.warmup):
        step()
    graph = None
    if gpu and cfg.cuda_graph:
        phases.enter("capture")
        graph = capture_graph(step)
    run = graph.replay if graph is not None else step
    if gpu:
        torch.cuda.synchronize()
    if distributed:
        dist.barrier()

    phases.enter("profile")
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
            phases.beat(i)
    phases.enter("export")
    raw = sidecar(out, rank, "json")
    prof.export_chrome_trace(str(raw))
    with (  # the gzip stream closes before the trace is renamed into place
        atomic_path(out / f"synth-TP-{rank}.trace.json.gz") as partial,
        open(raw, "rb") as src,
        gzip.open(partial, "wb") as dst,
    ):
        shutil.copyfileobj(src, dst)
    raw.unlink()
    atomic_write_text(sidecar(out, rank, "times.json"), json.dumps(times_ms))
    phases.enter("teardown")
    # a CUDA graph that captured NCCL collectives must be gone before the process group is destroyed, or
    # destroy_process_group hangs
    run = graph = None
    if gpu:
        torch.cuda.synchronize()
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
    phases.enter("done")


def _remove_sidecars(out: Path) -> None:
    """Every rank's sidecars and any temporary file a killed rank left (``iorw`` names them ``.<name>.*.tmp``)."""
    for pattern in (f"{SIDECAR_PREFIX}*", f".{SIDECAR_PREFIX}*.tmp", ".synth-TP-*.tmp"):
        for path in out.glob(pattern):
            path.unlink(missing_ok=True)


def _read_sidecar(out: Path, rank: int, kind: str, default: str) -> str:
    path = sidecar(out, rank, kind)
    return path.read_text().strip() if path.exists() else default


def _phase_of(out: Path, rank: int) -> str:
    return _read_sidecar(out, rank, "phase", "start-up")


def _join(context, cfg: SynthConfig, out: Path) -> None:
    """Wait for every rank; on a failure or past the deadline, end them all with one clear error."""
    import torch.multiprocessing as mp

    grace = cfg.timeout * 2 + 60  # the collectives' own timeout fires first; this catches a rank stuck elsewhere
    deadline, seen = time.monotonic() + grace, None
    try:
        while not context.join(timeout=1.0):
            progress = [(_phase_of(out, r), _read_sidecar(out, r, "beat", "")) for r in range(cfg.ranks)]
            if progress != seen:  # a rank entered a new phase or finished a step
                deadline, seen = time.monotonic() + grace, progress
            if time.monotonic() > deadline:
                stuck = [(r, phase) for r, (phase, _) in enumerate(progress) if phase != "done"]
                where = ", ".join(f"rank {r} in phase '{p}'" for r, p in stuck) or "every rank"
                raise SynthError(f"synth-verify: no progress within {cfg.timeout:.0f} s ({where}); all ranks ended")
    except mp.ProcessExitedException as exc:
        raise SynthError(
            f"synth-verify: rank {exc.error_index} died in phase '{_phase_of(out, exc.error_index)}' "
            f"(exit code {exc.exit_code}); all ranks ended"
        ) from None
    except mp.ProcessRaisedException as exc:
        rank = getattr(exc, "error_index", "?")
        last = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        phase = _phase_of(out, rank) if isinstance(rank, int) else "?"
        message = f"synth-verify: rank {rank} failed in phase '{phase}': {last[:300]}; all ranks ended"
        raise SynthError(message) from None
    finally:
        for proc in context.processes:
            if proc.is_alive():
                proc.kill()
        for error_file in context.error_files:  # torch leaves a failed rank's pickled error in the temporary folder
            with contextlib.suppress(OSError):
                os.unlink(error_file)


# Ranks are forked from one server process that imported these once, so a rank starts in a fraction of a second
# instead of the ~2 CPU-s a fresh interpreter spends importing torch (per rank, per run). The server never touches
# CUDA, so forked ranks may.
RANK_PRELOAD = ["torch", "torch.distributed", "torch.profiler", "verifylab.synth.verify_pass"]
# torch's profiler asks ``hasattr(torch, "_inductor")`` as it starts, which imports the compiler stack (about
# 2 CPU-s per rank). Ranks on the CPU (gloo) get it from the server too; on GPUs each rank imports it itself,
# since that import is not known to leave CUDA untouched, and the server must not have touched CUDA.
CPU_RANK_PRELOAD = [*RANK_PRELOAD, "torch._inductor"]


def _start_ranks(cfg: SynthConfig, rendezvous: Path, out: Path):
    import multiprocessing

    import torch.multiprocessing as mp

    preload = CPU_RANK_PRELOAD if cfg.backend == "gloo" else RANK_PRELOAD
    multiprocessing.get_context("forkserver").set_forkserver_preload(preload)
    args = (cfg, str(rendezvous), str(out), (os.getpid(), dict(os.environ)))
    return mp.start_processes(_worker, args=args, nprocs=cfg.ranks, join=False, start_method="forkserver")


def run_synth_verify(cfg: SynthConfig) -> dict:
    """Start the ranks, write ``synth-TP-<rank>.trace.json.gz`` per rank, return per-rank step times."""
    if cfg.backend == "nccl":
        import torch

        if torch.cuda.device_count() < cfg.ranks:
            raise ParameterError(f"--ranks {cfg.ranks} needs {cfg.ranks} GPUs; {torch.cuda.device_count()} visible")
    if cfg.profile_dir is None:
        raise ParameterError("--profile-dir is required: it receives one trace per rank")
    out = Path(cfg.profile_dir)
    out.mkdir(parents=True, exist_ok=True)
    rendezvous = fresh_rendezvous(out, f"{SIDECAR_PREFIX}-rendezvous")  # removed with the sidecars
    try:
        if cfg.ranks == 1:
            _worker(0, cfg, str(rendezvous), str(out))
        else:
            _join(_start_ranks(cfg, rendezvous, out), cfg, out)
        times = {}
        for rank in range(cfg.ranks):
            times[rank] = json.loads(sidecar(out, rank, "times.json").read_text())
    finally:
        with contextlib.suppress(OSError):
            _remove_sidecars(out)
    medians = [statistics.median(t) for t in times.values()]
    return {
        "config": cfg.model_dump(mode="json"),
        "traces": [str(out / f"synth-TP-{r}.trace.json.gz") for r in range(cfg.ranks)],
        "step_ms": times,
        "median_step_ms": max(medians),
    }
