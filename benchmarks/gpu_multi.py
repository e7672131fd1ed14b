"""All-reduce latency vs message size on N GPUs of one host, and the synthetic TP verify pass with NCCL.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
    PYTHONPATH=src python benchmarks/gpu_multi.py --out OUT [--ranks N] [--host-memory] [--synth]

Per k in --ks (k x 7168 bf16 values), under CUDA graphs, median over replays, sum checked:
- ``nccl``: torch.distributed all-reduce (NCCL default);
- ``nccl_plus_fused_norm``: NCCL all-reduce then FlashInfer's fused add+RMSNorm (the unfused pair);
- ``flashinfer_fused_oneshot`` / ``_twoshot``: FlashInfer's TRT-LLM all-reduce + residual + RMSNorm kernel
  (needs >= 2 ranks and peer-to-peer access).
``--host-memory`` repeats NCCL with NCCL_P2P_DISABLE=1 (through host memory): a stand-in for a PCIe box
without P2P, *never* to be compared with the fused kernel, which still uses NVLink peer-to-peer.
``--synth`` runs `verifylab synth-verify --backend nccl` (61 layers, k = 1, 4, 16; unfused and fused norm).
NVLink multicast stays off. Writes ``allreduce_latency.json`` (+ synth traces) under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
KS = [1, 2, 4, 8, 16, 32, 64, 128, 512, 2048]
HIDDEN = 7168
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _graph_us(fn, calls: int, replays: int) -> float:
    import torch

    from verifylab.synth.cuda import capture_graph

    graph = capture_graph(fn, calls=calls)
    times = []
    for _ in range(replays):
        torch.distributed.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def _inputs(k: int, rank: int, world: int, device):
    import torch

    gens = [torch.Generator(device=device).manual_seed(1000 * r + k) for r in range(world)]
    per_rank = [torch.randn(k, HIDDEN, generator=g, device=device, dtype=torch.float32) for g in gens]
    return per_rank[rank].to(torch.bfloat16), sum(per_rank)


def worker(rank: int, world: int, ks: list[int], out: str, label: str, calls: int, replays: int) -> None:
    import torch
    import torch.distributed as dist

    from verifylab.synth.verify_pass import add_rmsnorm_flashinfer

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("VERIFYLAB_PORT", "29533"), **SAFE_ENV)
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    rows = []
    fusion = None
    if world >= 2 and label == "nvlink":
        try:
            from flashinfer.comm import trtllm_ar

            ipc, workspace = trtllm_ar.trtllm_create_ipc_workspace_for_all_reduce_fusion(
                rank, world, max(ks), HIDDEN, group=dist.group.WORLD
            )[:2]
            fusion = (trtllm_ar, workspace, ipc)
        except Exception as exc:  # recorded, not hidden
            rows.append({"impl": "flashinfer_fused", "error": f"{type(exc).__name__}: {exc}"[:300]})
    weight = torch.randn(HIDDEN, device=device, dtype=torch.bfloat16)
    for k in ks:
        mine, expected = _inputs(k, rank, world, device)
        check = mine.clone()
        dist.all_reduce(check)
        err = ((check.float() - expected).norm() / expected.norm()).item()
        bufs = [mine.clone() for _ in range(calls)]
        it = iter(range(10**9))
        nccl_us = _graph_us(lambda bufs=bufs, it=it: dist.all_reduce(bufs[next(it) % calls]), calls, replays)
        rows.append({"impl": f"nccl ({label})", "tokens": k, "bytes": k * HIDDEN * 2, "us": nccl_us, "rel_err": err})
        if label != "nvlink":
            continue
        res = torch.randn(k, HIDDEN, device=device, dtype=torch.bfloat16)
        pair_buf = mine.clone()

        def pair(pair_buf=pair_buf, res=res):
            dist.all_reduce(pair_buf)
            add_rmsnorm_flashinfer(pair_buf, res, weight)

        rows.append(
            {
                "impl": "nccl_plus_fused_norm",
                "tokens": k,
                "bytes": k * HIDDEN * 2,
                "us": _graph_us(pair, calls, replays),
                "rel_err": err,
            }
        )
        if fusion is None:
            continue
        trtllm_ar, workspace, _ = fusion
        for oneshot in (True, False):
            if not oneshot and k <= world:
                continue
            out_norm, out_res = torch.empty_like(mine), torch.empty_like(mine)

            def fused(
                oneshot=oneshot,
                mine=mine,
                res=res,
                out_norm=out_norm,
                out_res=out_res,
                k=k,
                trtllm_ar=trtllm_ar,
                workspace=workspace,
            ):
                trtllm_ar.trtllm_allreduce_fusion(
                    allreduce_in=mine,
                    world_size=world,
                    world_rank=rank,
                    token_num=k,
                    hidden_dim=HIDDEN,
                    workspace_ptrs=workspace,
                    launch_with_pdl=False,
                    trigger_completion_at_end=True,
                    fp32_acc=True,
                    pattern_code=trtllm_ar.AllReduceFusionPattern.kARResidualRMSNorm,
                    use_oneshot=oneshot,
                    allreduce_out=None,
                    residual_in=res,
                    residual_out=out_res,
                    norm_out=out_norm,
                    quant_out=None,
                    scale_out=None,
                    rms_gamma=weight,
                    rms_eps=1e-6,
                    scale_factor=None,
                    layout_code=None,
                )

            fused()
            torch.cuda.synchronize()
            ref_res = expected + res.float()
            fused_err = ((out_res.float() - ref_res).norm() / ref_res.norm()).item()
            rows.append(
                {
                    "impl": f"flashinfer_fused_{'oneshot' if oneshot else 'twoshot'}",
                    "tokens": k,
                    "bytes": k * HIDDEN * 2,
                    "us": _graph_us(fused, calls, replays),
                    "rel_err": fused_err,
                }
            )
    if rank == 0:
        Path(out, f"allreduce_{label}_w{world}.json").write_text(json.dumps(rows, indent=2))
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ranks", type=int, default=0, help="GPUs (default: all visible)")
    parser.add_argument("--ks", default=",".join(map(str, KS)))
    parser.add_argument("--calls", type=int, default=20, help="all-reduces per graph")
    parser.add_argument("--replays", type=int, default=30)
    parser.add_argument("--host-memory", action="store_true", help="also NCCL with NCCL_P2P_DISABLE=1")
    parser.add_argument("--synth", action="store_true", help="also the synthetic verify pass with NCCL")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    import torch
    import torch.multiprocessing as mp

    world = args.ranks or torch.cuda.device_count()
    ks = [int(k) for k in args.ks.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    if args.child:
        mp.spawn(worker, args=(world, ks, str(args.out), args.child, args.calls, args.replays), nprocs=world)
        return
    topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, check=False).stdout
    (args.out / "topology.txt").write_text(topo)
    labels = ["nvlink"] + (["host_memory"] if args.host_memory else [])
    for label in labels:
        env = {
            **os.environ,
            **SAFE_ENV,
            **({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"} if label == "host_memory" else {}),
        }
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--out",
                str(args.out),
                "--ranks",
                str(world),
                "--ks",
                args.ks,
                "--calls",
                str(args.calls),
                "--replays",
                str(args.replays),
                "--child",
                label,
            ],
            env=env,
            check=True,
        )
    if args.synth:
        for k in (1, 4, 16):
            for fused in (False, True):
                folder = args.out / f"synth_k{k}_{'fused' if fused else 'unfused'}"
                cmd = [
                    sys.executable,
                    "-m",
                    "verifylab.cli",
                    "synth-verify",
                    "--backend",
                    "nccl",
                    "--ranks",
                    str(world),
                    "--tp",
                    "8",  # TP-8 shard shapes on however many ranks there are (the payload is k x 7168 either way)
                    "--layers",
                    "61",
                    "--tokens",
                    str(k),
                    "--steps",
                    "3",
                    "--profile-dir",
                    str(folder),
                    "--no-summarize",
                    *(["--fused-norm"] if fused else []),
                ]
                subprocess.run(cmd, env={**os.environ, **SAFE_ENV}, check=True)
    print(f"\n{'impl':<30} {'k':>5} {'us':>9} {'rel err':>9}")
    for path in sorted(args.out.glob("allreduce_*.json")):
        for r in json.loads(path.read_text()):
            if "error" in r:
                print(f"{r['impl']:<30} error: {r['error']}")
            else:
                print(f"{r['impl']:<30} {r['tokens']:>5} {r['us']:>9.2f} {r['rel_err']:>9.1e}")


if __name__ == "__main__":
    main()
