"""Communication of a TP verify pass, measured on N GPUs of one host: collective latency curves and the
synthetic verify pass with each communication variant, over three NCCL paths.

    PYTHONPATH=src python benchmarks/gpu_multi.py --out OUT            # on the GPU machine (~5 min, 2 x H200)
    python benchmarks/gpu_multi.py --ingest OUT --run-id ID --label L  # here: store it as ONE measured run

Paths (every table names one): ``nvlink`` (NCCL default: P2P over NVLink), ``shm`` (``NCCL_P2P_DISABLE=1``:
through host memory, the stand-in for a PCIe box without P2P) and ``socket`` (``NCCL_P2P_DISABLE=1
NCCL_SHM_DISABLE=1``: NCCL's network transport on loopback, the slowest stand-in). NCCL's own transport
lines (``NCCL_DEBUG=INFO``) are kept per path. FlashInfer's fused kernel writes into its peers' memory
(P2P), so it runs on ``nvlink`` only.

Latency curves (k x 7168 bf16, CUDA graphs of --calls collectives, median of --replays replays, checked
against float64): ``nccl``, ``nccl_plus_fused_norm`` (NCCL then one fused add+RMSNorm kernel: SGLang's
unfused path), ``fused`` (FlashInfer's all-reduce + residual + RMSNorm, as SGLang 0.5.17 calls it) and
``fused_legacy_settings`` (forced one-/two-shot, PDL off, fp32 accumulation: how no SGLang calls it); plus
all-gather and all-to-all of the same sizes.

Verify pass (Kimi-K2 TP-8 shard shapes, 61 layers or as many as --budget-gb allows, scaled to 61):
``compute_only``, ``nccl``, ``fused``, ``one_allreduce_per_layer`` and ``no_allreduce`` (elimination
stand-ins: what removing those all-reduces saves, not an algorithm), and ``nccl_pytorch_norm`` (the
multi-kernel PyTorch add+RMSNorm, a labelled extra). SGLang's own custom all-reduce is not run here: it
cannot be driven outside SGLang's process groups; the live TP-2 run shows it.

Safety: every process runs with NVLink multicast off (``verifylab.guard``: the three environment variables
and the ``sitecustomize`` guard); FlashInfer's workspace uses the ``trtllm`` backend, never ``mnnvl``.
Results are written after every phase (nothing measured is lost when a later phase fails).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from verifylab.guard import guarded_env  # noqa: E402
from verifylab.iorw import atomic_write_json  # noqa: E402

HIDDEN = 7168
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
            norm_out, res_out = fusion(mine.clone(), residual.clone(), weight)
            torch.cuda.synchronize()
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def nccl_transport(folder: Path, path: str) -> list[str]:
    """The distinct 'via ...' transports NCCL logged for this path's channels."""
    found = set()
    for log in sorted(folder.glob(f"nccl-{path}.*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if " via " in line:
                found.add(line.split(" via ", 1)[1].strip())
    return sorted(found)


def warm_jit() -> float:
    """Compile (or load from cache) FlashInfer's norm and TRT-LLM comm modules once, before any rank waits on
    a collective while its peer compiles. Returns seconds."""
    from flashinfer.comm.trtllm_ar import get_trtllm_comm_module
    from flashinfer.norm import get_norm_module

    started = time.time()
    with ThreadPoolExecutor(2) as pool:
        for job in [pool.submit(get_trtllm_comm_module), pool.submit(get_norm_module)]:
            job.result()
    print(f"FlashInfer JIT modules ready in {time.time() - started:.0f} s", flush=True)
    return round(time.time() - started, 1)


def measure(args: argparse.Namespace) -> None:
    import torch
    import torch.multiprocessing as mp

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    world = args.ranks or torch.cuda.device_count()
    if args.child:
        cfg = {
            "out": str(out),
            "port": _free_port(),
            "ks": [int(k) for k in args.ks.split(",")],
            "pass_ks": [int(k) for k in args.pass_ks.split(",")],
            "calls": args.calls,
            "replays": args.replays,
            "budget_gb": args.budget_gb,
            "profile_k": args.profile_k,
        }
        mp.spawn(worker, args=(world, args.child, cfg), nprocs=world, join=True)
        return
    if world < 2:
        sys.exit(f"gpu_multi.py needs >= 2 GPUs; {world} visible")
    topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, check=False).stdout
    p2p = subprocess.run(["nvidia-smi", "topo", "-p2p", "r"], capture_output=True, text=True, check=False).stdout
    (out / "topology.txt").write_text(topo + "\n# nvidia-smi topo -p2p r\n" + p2p)
    from verifylab.env import capture_host

    (out / "host.json").write_text(capture_host(ROOT, with_torch=True).model_dump_json(indent=1))
    summary = {"world": world, "paths": {}, "jit_warm_s": warm_jit()}
    for path in args.paths.split(","):
        env = guarded_env()
        env.update(PATH_ENV[path])
        env.update(
            NCCL_DEBUG="INFO",
            NCCL_DEBUG_SUBSYS="INIT,P2P,SHM,NET",
            NCCL_DEBUG_FILE=str(out / f"nccl-{path}.%h.%p.log"),
            VERIFYLAB_GUARD_QUIET="1",
        )
        cmd = [sys.executable, __file__, "--out", str(out), "--ranks", str(world), "--child", path]
        cmd += ["--ks", args.ks, "--pass-ks", args.pass_ks, "--calls", str(args.calls)]
        cmd += ["--replays", str(args.replays), "--budget-gb", str(args.budget_gb), "--profile-k", str(args.profile_k)]
        started = time.time()
        try:
            proc = subprocess.run(cmd, env=env, timeout=args.path_timeout, check=False)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        summary["paths"][path] = {
            "exit": rc,
            "seconds": round(time.time() - started, 1),
            "nccl_transport": nccl_transport(out, path),
            "meaning": PATH_MEANING[path],
        }
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        print(f"== {path}: exit {rc} in {summary['paths'][path]['seconds']} s", flush=True)
    print_table(out)


def print_table(out: Path) -> None:
    for f in sorted(out.glob("path-*.json")):
        data = json.loads(f.read_text())
        for err in data["errors"]:
            print(f"{data['path']}: {err['phase']} error: {err['error'][:200]}")
        print(f"\n{data['path']}: latency (us, median)")
        for r in data["latency"]:
            if r["impl"] in ("nccl", "fused", "nccl_plus_fused_norm") and r["tokens"] in (1, 16):
                print(f"  {r['impl']:<22} k={r['tokens']:<3} {r['us']:9.2f}  err {r['rel_err']}")
        print(f"{data['path']}: verify pass (ms per 61 layers)")
        for r in data["verify_pass"]:
            print(f"  {r['variant']:<24} k={r['tokens']:<3} {r['pass_ms']:8.3f}  layers {r['layers_measured']}")


# ------------------------------------------------------------------------------------------- ingest here
def ingest(folder: Path, run_id: str, label: str, data_dir: Path) -> None:
    """Store a finished folder as one measured run: allreduce_latency, collective_latency, verify_pass,
    verify_pass_pytorch_norm, nccl_transport and the trace summaries of the profiled passes."""
    import pandas as pd

    from verifylab.env import HostInfo
    from verifylab.runs import RunStore, manifest_from_host
    from verifylab.trace import summarize_traces

    host = HostInfo.model_validate_json((folder / "host.json").read_text())
    host.topology = (folder / "topology.txt").read_text().strip()
    summary = json.loads((folder / "summary.json").read_text())
    paths = [json.loads(f.read_text()) for f in sorted(folder.glob("path-*.json"))]
    latency = pd.DataFrame([r for p in paths for r in p["latency"]])
    passes = pd.DataFrame([r for p in paths for r in p["verify_pass"]])
    errors = [e for p in paths for e in p["errors"]]
    transports = pd.DataFrame(
        [
            {"path": p, "meaning": s["meaning"], "nccl_transport": "; ".join(s["nccl_transport"]), "exit": s["exit"]}
            for p, s in summary["paths"].items()
        ]
    )
    params = {
        "script": "benchmarks/gpu_multi.py",
        "world_size": summary["world"],
        "shape": "Kimi-K2 TP-8 shard, bf16, KV context 2048; all-reduce payload k x 7168 bf16",
        "paths": {p: s["meaning"] for p, s in summary["paths"].items()},
        "fusion_settings": "SGLang 0.5.17 (FlashInfer 0.6.15.post1): trtllm workspace, max_token_num 2048, "
        "pdl on, fp32_acc off, trigger_completion_at_end off, use_oneshot None (FlashInfer's heuristic)",
    }
    manifest = manifest_from_host(
        run_id, label, host, params, purpose="communication of a TP verify pass: fusion vs elimination, measured"
    )
    manifest.notes += [f"{e['phase']} failed on rank {e['rank']} of one path: {e['error']}" for e in errors]
    manifest.notes.append(
        "custom_ar (SGLang's own custom all-reduce) is not in this run: it runs only inside SGLang's process "
        "groups; the live TP-2 run shows it"
    )
    manifest.notes.append(
        "pass_ms is one full 61-layer pass scaled from layers_measured; compute_only and no_allreduce are the same "
        "program (no collective, norms kept), measured twice: their difference is run-to-run spread"
    )
    store = RunStore(data_dir / "runs")
    store.create(manifest)
    collectives = latency["impl"].isin(["all_gather", "all_to_all"])
    store.write_table(run_id, "allreduce_latency", latency[~collectives].reset_index(drop=True), fmt="csv")
    store.write_table(run_id, "collective_latency", latency[collectives].reset_index(drop=True), fmt="csv")
    extra = passes["variant"].isin(EXTRA_VARIANTS)
    store.write_table(run_id, "verify_pass", passes[~extra].reset_index(drop=True), fmt="csv")
    store.write_table(run_id, "verify_pass_pytorch_norm", passes[extra].reset_index(drop=True), fmt="csv")
    store.write_table(run_id, "nccl_transport", transports, fmt="csv")
    steps = []
    for trace_dir in sorted((folder / "traces").glob("*-k*")):
        path, variant, k = trace_dir.name.rsplit("-", 2)
        s = summarize_traces([trace_dir]).per_step()
        s.insert(0, "tokens", int(k[1:]))
        s.insert(0, "variant", variant)
        s.insert(0, "path", path)
        steps.append(s)
    if steps:
        store.write_table(run_id, "verify_pass_trace", pd.concat(steps, ignore_index=True), fmt="csv")
    print(f"stored run {run_id} in {data_dir / 'runs'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="results folder (on the GPU machine)")
    parser.add_argument("--ranks", type=int, default=0, help="GPUs (default: all visible)")
    parser.add_argument("--paths", default="nvlink,shm,socket", help="NCCL paths, in order")
    parser.add_argument("--ks", default=",".join(map(str, LATENCY_KS)), help="tokens for the latency curves")
    parser.add_argument("--pass-ks", default=",".join(map(str, PASS_KS)), help="tokens for the verify pass")
    parser.add_argument("--calls", type=int, default=20, help="collectives per captured graph")
    parser.add_argument("--replays", type=int, default=20, help="timed graph replays (median; >= 15)")
    parser.add_argument("--budget-gb", type=float, default=100.0, help="weights per GPU for the layer stack")
    parser.add_argument("--profile-k", type=int, default=4, help="k whose passes are also profiled")
    parser.add_argument("--path-timeout", type=float, default=420.0, help="seconds before a path is abandoned")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--ingest", type=Path, help="store a results folder as a measured run (here)")
    parser.add_argument("--run-id")
    parser.add_argument("--label", default="2 x H200 (NVLink), SM90 — mechanism, not Blackwell")
    parser.add_argument("--data-dir", type=Path, default=ROOT / "data")
    args = parser.parse_args()
    if args.ingest:
        if not args.run_id:
            parser.error("--ingest needs --run-id")
        ingest(args.ingest, args.run_id, args.label, args.data_dir)
    elif args.out:
        if args.replays < 15:
            parser.error("--replays must be >= 15 (medians of fewer replays are too noisy)")
        measure(args)
    else:
        parser.error("give --out (measure on the GPUs) or --ingest (store results here)")


if __name__ == "__main__":
    main()
