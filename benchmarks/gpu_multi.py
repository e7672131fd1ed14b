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
import json
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpu_multi_ranks import EXTRA_VARIANTS, LATENCY_KS, PASS_KS, PATH_ENV, PATH_MEANING, worker  # noqa: E402

from verifylab.guard import guarded_env  # noqa: E402


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
    from verifylab.host import capture_host

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

    from verifylab.host import HostInfo
    from verifylab.store.manifest import manifest_from_host
    from verifylab.store.runs import RunStore
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
