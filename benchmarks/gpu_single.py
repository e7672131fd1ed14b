"""Compute side of a TP-8 Kimi-K2 verify pass on one GPU, the kernel-fusion saving of add+RMSNorm,
and a profiler trace of one synthetic single-rank pass. One GPU shows no communication.

    PYTHONPATH=src python benchmarks/gpu_single.py --out OUT            # on the GPU machine
    python benchmarks/gpu_single.py --ingest OUT --run-id ID --label L  # here: store it as a measured run

Prints a short table last. Method (METHOD.md): ceilings first (device copy, bf16 matmul on random
data), CUDA-graph replay, median of many replays, correctness against float64.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

KS = [1, 2, 4, 8, 16, 32, 64]


def _events_median_ms(fn, repeats: int, warmup: int = 3) -> float:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def ceilings() -> dict:
    """Device-to-device copy bandwidth (bytes read + written) and bf16 matmul rate, random data."""
    import torch

    n = 1 << 30  # 2 GiB of bf16
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    copy_ms = _events_median_ms(lambda dst=dst, src=src: dst.copy_(src), repeats=20)
    bw = 2 * n * 2 / (copy_ms / 1e3)
    del src, dst
    size = 8192
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    mm_ms = _events_median_ms(lambda: a @ b, repeats=20)
    return {
        "copy_bytes": 2 * n * 2,
        "copy_ms": copy_ms,
        "copy_bandwidth_gbs": bw / 1e9,
        "matmul_n": size,
        "matmul_ms": mm_ms,
        "matmul_tflops": 2 * size**3 / (mm_ms / 1e3) / 1e12,
    }


def release_gpu_memory() -> None:
    """Drop unreachable stacks and graph pools before the next allocation."""
    import gc

    import torch

    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def graph_of(fn):
    """Two warm-up calls on a side stream, then one call captured (the shared helper)."""
    from verifylab.synth.cuda import capture_graph

    return capture_graph(fn, calls=1, warmup=2)


def shard_compute(ks: list[int], budget_gb: float, replays: int, bandwidth_gbs: float) -> list[dict]:
    """Per k: time per MoE layer and per 61-layer pass of one TP-8 shard, unfused and fused norm."""
    import torch

    from verifylab.shapes import KIMI_K2, ShardShape, weight_bytes_per_layer
    from verifylab.synth import verify_pass as vp

    shard = ShardShape(KIMI_K2, 8)
    rows = []
    for k in ks:
        probe = vp.make_routing(k, 384, 8, torch.Generator().manual_seed(k), "cpu", torch.float32)
        per_layer = weight_bytes_per_layer(shard, probe.experts)
        layers = max(1, min(KIMI_K2.layers, int(budget_gb * 1e9 // per_layer)))
        stack = vp.ShardStack(
            shard, k, layers, context=2048, seed=k, device="cuda", dtype=torch.bfloat16, first_dense=0
        )
        read_bytes = stack.weight_bytes()
        for norm_name, add_norm in (
            ("unfused", vp.add_rmsnorm_unfused),
            ("flashinfer_fused", vp.add_rmsnorm_flashinfer),
        ):
            graph = graph_of(lambda add_norm=add_norm, stack=stack: stack.forward(vp.identity_allreduce, add_norm))
            ms = _events_median_ms(graph.replay, repeats=replays)
            layer_ms = ms / layers
            floor_ms = read_bytes / layers / (bandwidth_gbs * 1e9) * 1e3
            rows.append(
                {
                    "tokens": k,
                    "norm": norm_name,
                    "layers_measured": layers,
                    "experts_touched": stack.routing.experts,
                    "bytes_read_per_layer": read_bytes / layers,
                    "stack_ms": ms,
                    "layer_ms": layer_ms,
                    "pass_ms_61_layers": layer_ms * KIMI_K2.layers,
                    "floor_layer_ms": floor_ms,
                    "fraction_of_floor": floor_ms / layer_ms,
                }
            )
            print(
                f"k={k:3d} {norm_name:16s} layers={layers:2d} experts={stack.routing.experts:3d} "
                f"layer={layer_ms * 1e3:8.1f} us  pass(61)={layer_ms * 61:7.2f} ms  "
                f"floor={floor_ms / layer_ms:5.1%}",
                flush=True,
            )
            del graph
        del stack
        release_gpu_memory()
    return rows


def norm_fusion(ks: list[int], calls: int = 100, replays: int = 20) -> list[dict]:
    """Residual add + RMSNorm at k x 7168: PyTorch (several kernels) vs FlashInfer's fused kernel."""
    import torch

    from verifylab.synth import verify_pass as vp

    rows = []
    hidden = 7168
    for k in ks:
        x = torch.randn(k, hidden, device="cuda", dtype=torch.bfloat16)
        res = torch.randn(k, hidden, device="cuda", dtype=torch.bfloat16)
        weight = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
        r64 = x.double() + res.double()
        ref = r64 * torch.rsqrt(r64.pow(2).mean(-1, keepdim=True) + vp.EPS) * weight.double()
        out_u, _ = vp.add_rmsnorm_unfused(x.clone(), res.clone(), weight)
        xf, rf = x.clone(), res.clone()
        out_f, res_f = vp.add_rmsnorm_flashinfer(xf, rf, weight)
        err_u = ((out_u.double() - ref).norm() / ref.norm()).item()
        err_f = ((out_f.double() - ref).norm() / ref.norm()).item()
        err_res = ((res_f.double() - r64).norm() / r64.norm()).item()
        timings = {}
        for name, fn in (
            ("unfused", vp.add_rmsnorm_unfused),
            ("flashinfer_fused", vp.add_rmsnorm_flashinfer),
        ):
            xs, rs = x.clone(), res.clone()

            def many(fn=fn, xs=xs, rs=rs, weight=weight):
                for _ in range(calls):
                    fn(xs, rs, weight)

            graph = graph_of(many)
            timings[name] = _events_median_ms(graph.replay, repeats=replays) / calls * 1e3
        rows.append(
            {
                "tokens": k,
                "hidden": hidden,
                "unfused_us": timings["unfused"],
                "fused_us": timings["flashinfer_fused"],
                "saving_us": timings["unfused"] - timings["flashinfer_fused"],
                "rel_err_unfused": err_u,
                "rel_err_fused": err_f,
                "rel_err_fused_residual": err_res,
            }
        )
        print(
            f"norm k={k:3d} unfused={timings['unfused']:6.2f} us fused={timings['flashinfer_fused']:6.2f} us "
            f"err u={err_u:.1e} f={err_f:.1e}",
            flush=True,
        )
    return rows


def traces(out: Path) -> list[dict]:
    from verifylab.synth.runner import SynthConfig, run_synth_verify

    results = []
    for fused in (False, True):
        folder = out / ("trace_fused" if fused else "trace_unfused")
        cfg = SynthConfig(
            backend="none",
            ranks=1,
            tp=8,
            layers=61,
            hidden=7168,
            tokens=4,
            steps=2,
            warmup=1,
            context=2048,
            norm="fused_kernel" if fused else "pytorch",
            profile_dir=folder,
        )
        res = run_synth_verify(cfg)
        release_gpu_memory()
        results.append({"fused_norm": fused, "median_step_ms": res["median_step_ms"], "folder": folder.name})
    return results


def measure(out: Path, ks: list[int], budget_gb: float, replays: int) -> None:
    import torch

    from verifylab.host import capture_host

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    host = capture_host(ROOT)
    (out / "host.json").write_text(host.model_dump_json(indent=2))
    result: dict = {"gpu": torch.cuda.get_device_name(0), "started": t0}

    def save() -> None:  # after every phase: a crash later loses nothing measured before it
        result["seconds"] = time.time() - t0
        (out / "results.json").write_text(json.dumps(result, indent=2))

    result["ceilings"] = ceilings()
    print(json.dumps(result["ceilings"]), flush=True)
    save()
    release_gpu_memory()
    result["traces"] = traces(out)
    save()
    release_gpu_memory()
    result["norm"] = norm_fusion(ks)
    save()
    result["compute"] = shard_compute(ks, budget_gb, replays, result["ceilings"]["copy_bandwidth_gbs"])
    save()
    print_table(result)


def print_table(result: dict) -> None:
    c = result["ceilings"]
    print(f"\nceilings: copy {c['copy_bandwidth_gbs']:.0f} GB/s, bf16 matmul {c['matmul_tflops']:.0f} TFLOP/s")
    print(f"{'k':>4} {'norm':>16} {'layer us':>9} {'pass(61) ms':>12} {'floor %':>8}")
    for r in result["compute"]:
        print(
            f"{r['tokens']:>4} {r['norm']:>16} {r['layer_ms'] * 1e3:>9.1f} {r['pass_ms_61_layers']:>12.2f} "
            f"{r['fraction_of_floor'] * 100:>7.1f}%"
        )
    print(f"{'k':>4} {'unfused us':>11} {'fused us':>9}")
    for r in result["norm"]:
        print(f"{r['tokens']:>4} {r['unfused_us']:>11.2f} {r['fused_us']:>9.2f}")
    print(f"total {result['seconds']:.0f} s")


def ingest(folder: Path, run_id: str, label: str, data_dir: Path) -> None:
    """Store a finished measurement folder as a measured run (manifest + tables)."""
    import pandas as pd

    from verifylab.host import HostInfo
    from verifylab.store.manifest import manifest_from_host
    from verifylab.store.runs import RunStore

    result = json.loads((folder / "results.json").read_text())
    host = HostInfo.model_validate_json((folder / "host.json").read_text())
    params = {
        "script": "benchmarks/gpu_single.py",
        "shape": "Kimi-K2 TP-8 shard, bf16",
        "context_tokens": 2048,
        "dtype": "bfloat16",
        "ceilings": result["ceilings"],
    }
    store = RunStore(data_dir / "runs")
    manifest = manifest_from_host(
        run_id,
        label,
        host,
        params,
        purpose="compute side of a TP-8 verify pass and the add+RMSNorm fusion saving, one GPU",
    )
    store.create(manifest)
    store.write_table(run_id, "ceilings", pd.DataFrame([result["ceilings"]]), fmt="csv")
    store.write_table(run_id, "shard_compute", pd.DataFrame(result["compute"]), fmt="csv")
    store.write_table(run_id, "norm_fusion", pd.DataFrame(result["norm"]), fmt="csv")
    print(f"stored run {run_id} in {data_dir / 'runs'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="folder for results.json, host.json and traces (GPU machine)")
    parser.add_argument("--ks", default=",".join(map(str, KS)), help="token counts k (default %(default)s)")
    parser.add_argument("--budget-gb", type=float, default=50.0, help="GPU memory for one layer stack")
    parser.add_argument("--replays", type=int, default=30, help="graph replays per timing (median)")
    parser.add_argument("--ingest", type=Path, help="store a results folder as a measured run (here)")
    parser.add_argument("--run-id")
    parser.add_argument("--label", default="H200, SM90, one GPU — not Blackwell")
    parser.add_argument("--data-dir", type=Path, default=ROOT / "data")
    args = parser.parse_args()
    if args.ingest:
        if not args.run_id:
            parser.error("--ingest needs --run-id")
        ingest(args.ingest, args.run_id, args.label, args.data_dir)
    elif args.out:
        measure(args.out, [int(k) for k in args.ks.split(",")], args.budget_gb, args.replays)
    else:
        parser.error("give --out (measure on a GPU) or --ingest (store results)")


if __name__ == "__main__":
    main()
