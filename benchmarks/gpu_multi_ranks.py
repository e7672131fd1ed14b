"""What each rank of ``gpu_multi.py`` runs: collective latency curves and the synthetic TP verify pass per
communication variant, on one NCCL path (the parent script picks the path through the environment).
Imported by ``gpu_multi.py``; not a script of its own."""

from __future__ import annotations

import gzip
import os
import shutil
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from verifylab.iorw import atomic_write_json  # noqa: E402
from verifylab.vocab import KIMI_K2_HIDDEN  # noqa: E402

HIDDEN = KIMI_K2_HIDDEN
LAYERS = 61
LATENCY_KS = [1, 2, 4, 8, 16, 32, 64]
PASS_KS = [1, 4, 16]
PATH_ENV = {
    "nvlink": {},
    "shm": {"NCCL_P2P_DISABLE": "1"},
    "socket": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"},
}
PATH_MEANING = {
    "nvlink": "NCCL default: P2P over NVLink",
    "shm": "NCCL_P2P_DISABLE=1: through host memory (stand-in for a PCIe box without P2P)",
    "socket": "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: NCCL's network transport on loopback (slowest stand-in)",
}
NO_P2P_NOTE = "not run: FlashInfer's fused kernel writes into its peers' memory (P2P); this path has no P2P"
PASS_VARIANTS = ["compute_only", "nccl", "fused", "one_allreduce_per_layer", "no_allreduce"]
EXTRA_VARIANTS = ["nccl_pytorch_norm"]


# ----------------------------------------------------------------------------------------------- GPU side
def _replay_us(graph, calls: int, replays: int, barrier) -> list[float]:
    """Per-call microseconds of each of ``replays`` graph replays (events around each replay)."""
    import torch

    times = []
    for _ in range(replays):
        barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return times


def _rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def _rank_inputs(shape: tuple[int, ...], k: int, world: int, device, salt: int = 0):
    """Every rank's bf16 input (same generators on every rank, so each knows the others')."""
    import torch

    out = []
    for r in range(world):
        gen = torch.Generator(device=device).manual_seed(1_000_003 * (r + 1) + 7919 * k + salt)
        out.append(torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).to(torch.bfloat16))
    return out


def _rmsnorm64(x, weight, eps: float = 1e-6):
    return x * (x.pow(2).mean(-1, keepdim=True) + eps).rsqrt() * weight.double()


def latency_rows(rank: int, world: int, path: str, ks: list[int], calls: int, replays: int, device) -> list[dict]:
    """Collective latency vs message size on this path (rank 0's rows are kept)."""
    import torch
    import torch.distributed as dist

    from verifylab.synth.cuda import capture_graph
    from verifylab.synth.flashinfer_fusion import SGLANG_0_5_17, FlashInferFusedAllReduce, legacy_settings
    from verifylab.synth.verify_pass import add_rmsnorm_flashinfer

    rows: list[dict] = []
    barrier = dist.barrier

    def row(impl: str, k: int, nbytes: int, times: list[float] | None, err: float | None, settings: str, note=""):
        rows.append(
            {
                "path": path,
                "impl": impl,
                "tokens": k,
                "bytes": nbytes,
                "us": statistics.median(times) if times else float("nan"),
                "us_min": min(times) if times else float("nan"),
                "us_max": max(times) if times else float("nan"),
                "replays": len(times or []),
                "rel_err": err,
                "settings": settings,
                "note": note,
            }
        )

    fusions = {}
    if path == "nvlink":
        for settings in (SGLANG_0_5_17, legacy_settings(True), legacy_settings(False)):
            fusions[settings.name] = FlashInferFusedAllReduce(rank, world, HIDDEN, settings)
    weight = (torch.rand(HIDDEN, device=device) + 0.5).to(torch.bfloat16)
    for k in ks:
        nbytes = k * HIDDEN * 2
        inputs = _rank_inputs((k, HIDDEN), k, world, device)
        expected = sum(t.double() for t in inputs)
        mine = inputs[rank]
        # NCCL all-reduce
        check = mine.clone()
        dist.all_reduce(check)
        err = _rel(check, expected)
        bufs = [mine.clone() for _ in range(calls)]
        graph = capture_graph(lambda bufs=bufs: [dist.all_reduce(b) for b in bufs], calls=1)
        row("nccl", k, nbytes, _replay_us(graph, calls, replays, barrier), err, "torch.distributed NCCL, defaults")
        del graph
        # NCCL, then one fused add+RMSNorm kernel (SGLang's unfused path)
        pairs = [(mine.clone(), torch.zeros_like(mine)) for _ in range(calls)]

        def nccl_then_norm(pairs=pairs):
            for x, res in pairs:
                dist.all_reduce(x)
                add_rmsnorm_flashinfer(x, res, weight)

        graph = capture_graph(nccl_then_norm, calls=1)
        row(
            "nccl_plus_fused_norm",
            k,
            nbytes,
            _replay_us(graph, calls, replays, barrier),
            err,
            "NCCL all-reduce + FlashInfer fused_add_rmsnorm (one kernel)",
        )
        del graph
        # FlashInfer fused all-reduce + residual + RMSNorm
        residual = _rank_inputs((k, HIDDEN), k, 1, device, salt=17)[0]
        ref_res = expected + residual.double()
        ref_norm = _rmsnorm64(ref_res, weight)
        for name, fusion in fusions.items():
            impl = "fused" if name == SGLANG_0_5_17.name else "fused_legacy_settings"
            if fusion.settings.use_oneshot is False and k <= world:
                row(impl, k, nbytes, None, None, fusion.settings.describe(), "two-shot needs k > ranks")
                continue
            try:  # a size a forced strategy refuses is a row saying so, not the end of this path's curves
                norm_out, res_out = fusion(mine.clone(), residual.clone(), weight)
                torch.cuda.synchronize()
            except Exception as exc:  # the same shapes on every rank: every rank refuses alike
                row(impl, k, nbytes, None, None, fusion.settings.describe(), f"refused: {exc}"[:200])
                continue
            f_err = max(_rel(res_out, ref_res), _rel(norm_out, ref_norm))
            ins = [(mine.clone(), residual.clone()) for _ in range(calls)]
            graph = capture_graph(lambda ins=ins, fusion=fusion: [fusion(x, r, weight) for x, r in ins], calls=1)
            row(impl, k, nbytes, _replay_us(graph, calls, replays, barrier), f_err, fusion.settings.describe())
            del graph
        if path != "nvlink":
            row("fused", k, nbytes, None, None, SGLANG_0_5_17.describe(), NO_P2P_NOTE)
        # all-gather and all-to-all of the same total size
        if (k * HIDDEN) % world == 0:
            part = k * HIDDEN // world
            shards = _rank_inputs((part,), k, world, device, salt=29)
            out = torch.empty(k * HIDDEN, device=device, dtype=torch.bfloat16)
            dist.all_gather_into_tensor(out, shards[rank])
            ag_err = _rel(out, torch.cat([s for s in shards]).double())
            outs = [torch.empty_like(out) for _ in range(calls)]
            graph = capture_graph(
                lambda outs=outs, src=shards[rank]: [dist.all_gather_into_tensor(o, src) for o in outs]
            )
            row(
                "all_gather",
                k,
                nbytes,
                _replay_us(graph, calls, replays, barrier),
                ag_err,
                "all_gather_into_tensor: each rank gives k x 7168 / ranks, receives k x 7168",
            )
            del graph
            sends = _rank_inputs((k * HIDDEN,), k, world, device, salt=31)
            got = torch.empty_like(sends[rank])
            dist.all_to_all_single(got, sends[rank])
            want = torch.cat([s.view(world, part)[rank] for s in sends])
            a2a_err = _rel(got, want)
            outs = [torch.empty_like(got) for _ in range(calls)]
            graph = capture_graph(lambda outs=outs, src=sends[rank]: [dist.all_to_all_single(o, src) for o in outs])
            row(
                "all_to_all",
                k,
                nbytes,
                _replay_us(graph, calls, replays, barrier),
                a2a_err,
                "all_to_all_single: each rank sends k x 7168 split evenly across ranks",
            )
            del graph
    for fusion in fusions.values():
        fusion.destroy()
    return rows


def layers_that_fit(k: int, budget_gb: float, layers: int) -> int:
    """How many TP-8 shard layers (each with its own weights) fit ``budget_gb`` at k tokens."""
    from verifylab.shapes import KIMI_K2, ShardShape, expected_distinct_experts, weight_bytes_per_layer

    shard = ShardShape(KIMI_K2, 8)
    per_layer = weight_bytes_per_layer(shard, round(expected_distinct_experts(k) * 1.1) + 1)
    return max(1, min(layers, int(budget_gb * 1e9 / (per_layer * 1.15))))


def pass_rows(
    rank: int,
    world: int,
    path: str,
    ks: list[int],
    replays: int,
    budget_gb: float,
    profile_k: int,
    out: Path,
    device,
) -> list[dict]:
    """The synthetic verify pass per communication variant (rank 0's rows are kept)."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function

    from verifylab.shapes import KIMI_K2, ModelShape, ShardShape
    from verifylab.synth import verify_pass as vp
    from verifylab.synth.cuda import capture_graph
    from verifylab.synth.flashinfer_fusion import SGLANG_0_5_17, FlashInferFusedAllReduce
    from verifylab.synth.runner import STEP_PREFIX

    rows: list[dict] = []
    fusion = FlashInferFusedAllReduce(rank, world, HIDDEN, SGLANG_0_5_17) if path == "nvlink" else None
    norm = vp.add_rmsnorm_flashinfer  # SGLang's unfused path: one fused add+RMSNorm kernel
    comms = {  # variant -> (communication, all-reduces per layer)
        "compute_only": (vp.layer_comm(vp.identity_allreduce, norm, 0), 0),
        "nccl": (vp.layer_comm(vp.dist_allreduce, norm, 2), 2),
        "fused": ((vp.FusedComm(fusion), 2) if fusion else None),
        "one_allreduce_per_layer": (vp.layer_comm(vp.dist_allreduce, norm, 1), 1),
        "no_allreduce": (vp.layer_comm(vp.dist_allreduce, norm, 0), 0),
        "nccl_pytorch_norm": (vp.layer_comm(vp.dist_allreduce, vp.add_rmsnorm_unfused, 2), 2),
    }
    for k in ks:
        measured = layers_that_fit(k, budget_gb, LAYERS)
        shape = ModelShape(**{**KIMI_K2.to_dict(), "layers": measured})
        stack = vp.ShardStack(ShardShape(shape, 8), k, measured, 2048, seed=0, device=device, dtype=torch.bfloat16)
        reference = None
        for variant, spec in comms.items():
            base = {"path": path, "variant": variant, "tokens": k, "layers_measured": measured}
            if spec is None:
                rows.append({**base, "allreduces_per_pass": 2 * LAYERS, "pass_ms": float("nan"), "note": NO_P2P_NOTE})
                continue
            comm, per_layer = spec
            result = torch.empty(k, HIDDEN, device=device, dtype=torch.bfloat16)

            def step(comm=comm, result=result, stack=stack):
                result.copy_(stack.forward(comm=comm))

            graph = capture_graph(step)
            graph.replay()
            torch.cuda.synchronize()
            if variant == "nccl":
                reference = result.clone()
            diff = _rel(result, reference) if reference is not None and variant in ("fused",) else None
            times = _replay_us(graph, 1, replays, dist.barrier)
            measured_ms = statistics.median(times) / 1e3
            rows.append(
                {
                    **base,
                    "allreduces_per_pass": per_layer * LAYERS,
                    "pass_ms": measured_ms * LAYERS / measured,
                    "measured_ms": measured_ms,
                    "measured_ms_min": min(times) / 1e3,
                    "measured_ms_max": max(times) / 1e3,
                    "replays": len(times),
                    "rel_diff_vs_nccl": diff,
                    "note": "",
                }
            )
            if k == profile_k and variant in ("compute_only", "nccl", "fused"):
                folder = out / "traces" / f"{path}-{variant}-k{k}"
                folder.mkdir(parents=True, exist_ok=True)
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    for i in range(3):
                        with record_function(f"{STEP_PREFIX}{i}"):
                            graph.replay()
                            torch.cuda.synchronize()
                raw = folder / f".rank{rank}.json"
                prof.export_chrome_trace(str(raw))
                with open(raw, "rb") as src, gzip.open(folder / f"synth-TP-{rank}.trace.json.gz", "wb") as dst:
                    shutil.copyfileobj(src, dst)
                raw.unlink()
            del graph
            torch.cuda.synchronize()
            dist.barrier()
        del stack
        torch.cuda.empty_cache()
    if fusion is not None:
        fusion.destroy()
    return rows


def worker(rank: int, world: int, path: str, args: dict) -> None:
    import torch
    import torch.distributed as dist

    out = Path(args["out"])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args["port"]))
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device, timeout=timedelta(seconds=300))
    result: dict = {"path": path, "meaning": PATH_MEANING[path], "latency": [], "verify_pass": [], "errors": []}

    def save() -> None:
        if rank == 0:
            atomic_write_json(out / f"path-{path}.json", result)

    for phase, fn in (
        ("latency", lambda: latency_rows(rank, world, path, args["ks"], args["calls"], args["replays"], device)),
        (
            "verify_pass",
            lambda: pass_rows(
                rank, world, path, args["pass_ks"], args["replays"], args["budget_gb"], args["profile_k"], out, device
            ),
        ),
    ):
        started = time.time()
        try:
            result[phase] = fn()
        except Exception as exc:  # recorded, and the next phase still runs
            result["errors"].append({"phase": phase, "rank": rank, "error": f"{type(exc).__name__}: {exc}"[:800]})
            print(f"[{path} rank {rank}] {phase} failed: {exc}", file=sys.stderr, flush=True)
        result[f"{phase}_s"] = round(time.time() - started, 1)
        torch.cuda.synchronize()
        save()
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
