"""Speed and memory of `verifylab trace summarize` against `json.load` + a naive pass, same files, same run.

    python benchmarks/trace_throughput.py [--folder DIR] [--mb-per-rank 250] [--ranks 2] [--keep DIR]
        [--also-src OTHER_CHECKOUT/src]

    the issue's case, 8 ranks x 500 MB (4 GB, generated, never committed):
    python benchmarks/trace_throughput.py --ranks 8 --mb-per-rank 500 --keep /tmp/traces-8x500

Generates (or takes) a folder of per-rank Chrome traces shaped like PyTorch profiler output (CPU ops,
kernels, runtime calls, flow events, 122 NCCL all-reduces per ProfilerStep), then runs each approach in a
fresh process and samples the resident memory of that process *and its children* (the summarizer reads
ranks in parallel processes). Prints wall seconds, CPU seconds (the process tree), peak RSS and PSS, MB/s and the
ratios against json.load measured in the same run (and Holistic Trace Analysis where it is installed, and
another verifylab checkout given with --also-src: before/after in one run); all must agree on the counts.
Reference points measured on the CI-sized 2-core machine for a 2 x 248 MB folder (from the issue):
json.load + count 28 s / 2.1 GB; Holistic Trace Analysis 0.5.0, 44 s / 1.7 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tree_cpu import children_cpu

ROOT = Path(__file__).resolve().parents[1]

NAIVE = r"""
import json, sys
total_events = 0
allreduce = 0
for path in sys.argv[1:]:
    with open(path) as fh:
        doc = json.load(fh)
    for ev in doc["traceEvents"]:
        total_events += 1
        if ev.get("cat") == "kernel" and "AllReduce" in ev.get("name", ""):
            allreduce += 1
print(json.dumps({"events": total_events, "allreduce_kernels": allreduce}))
"""

REFERENCE = r"""
import json, sys
import msgspec

class Ev(msgspec.Struct, gc=False):
    ph: str = ""
    name: str = ""
    cat: str = ""
    ts: float = 0.0
    dur: float = 0.0

class Trace(msgspec.Struct, gc=False):
    traceEvents: list[Ev]

decoder = msgspec.json.Decoder(Trace)
steps = allreduce = 0
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        events = decoder.decode(fh.read()).traceEvents  # each file decoded whole, typed
    for ev in events:
        if ev.cat == "kernel" and "AllReduce" in ev.name:
            allreduce += 1
        elif ev.name.startswith("ProfilerStep#"):
            steps += 1
    del events
print(json.dumps({"allreduce_kernels": allreduce, "steps": steps}))
"""

OURS = r"""
import json, sys
from verifylab.trace import summarize_traces
s = summarize_traces(sys.argv[1:])
print(json.dumps({"allreduce_kernels": int(s.steps["allreduce_count"].sum()), "steps": len(s.steps)}))
"""

CPU_OPS = [
    "aten::mm",
    "aten::add",
    "aten::mul",
    "aten::view",
    "aten::empty",
    "aten::copy_",
    "aten::rsqrt",
    "aten::mean",
    "aten::pow",
    "aten::to",
    "aten::_to_copy",
    "aten::silu",
    "aten::bmm",
]
NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
KERNELS = [
    "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT",
    "void at::native::vectorized_elementwise_kernel<4, at::native::rsqrt_kernel_cuda>",
    "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float>>>",
    "fused_moe_kernel",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16",
]


def write_rank_trace(path: Path, rank: int, target_bytes: int) -> int:
    """A PyTorch-profiler-shaped trace of about ``target_bytes``; returns the number of events."""
    rng = random.Random(rank)
    ts, corr, n, step = 1_000_000.0, 1, 0, 0
    with open(path, "w") as fh:
        fh.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n  "traceEvents": [\n')
        first = True

        def emit(obj: dict) -> None:
            nonlocal first, n
            fh.write(("" if first else ",\n") + "  " + json.dumps(obj))
            first = False
            n += 1

        while fh.tell() < target_bytes:
            step_start = ts
            for _layer in range(61):
                for _half in range(2):
                    for _ in range(6):
                        name = rng.choice(CPU_OPS)
                        emit(
                            {
                                "ph": "X",
                                "cat": "cpu_op",
                                "name": name,
                                "pid": rank,
                                "tid": 1,
                                "ts": ts,
                                "dur": 3.5,
                                "args": {
                                    "External id": corr,
                                    "Record function id": 0,
                                    "Sequence number": corr,
                                    "Fwd thread id": 0,
                                },
                            }
                        )
                        emit(
                            {
                                "ph": "X",
                                "cat": "cuda_runtime",
                                "name": "cudaLaunchKernel",
                                "pid": rank,
                                "tid": 1,
                                "ts": ts + 0.5,
                                "dur": 2.0,
                                "args": {"cbid": 211, "correlation": corr},
                            }
                        )
                        emit(
                            {
                                "ph": "X",
                                "cat": "kernel",
                                "name": rng.choice(KERNELS),
                                "pid": 0,
                                "tid": 7,
                                "ts": ts + 3,
                                "dur": 9.0,
                                "args": {
                                    "correlation": corr,
                                    "stream": 7,
                                    "device": rank,
                                    "grid": [132, 1, 1],
                                },
                            }
                        )
                        emit(
                            {
                                "ph": "f",
                                "id": corr,
                                "pid": 0,
                                "tid": 7,
                                "ts": ts + 3,
                                "cat": "ac2g",
                                "name": "ac2g",
                                "bp": "e",
                            }
                        )
                        ts += 12
                        corr += 1
                    emit(
                        {
                            "ph": "X",
                            "cat": "cpu_op",
                            "name": "c10d::allreduce_",
                            "pid": rank,
                            "tid": 1,
                            "ts": ts,
                            "dur": 20.0,
                            "args": {"External id": corr},
                        }
                    )
                    emit(
                        {
                            "ph": "X",
                            "cat": "cpu_op",
                            "name": "nccl:all_reduce",
                            "pid": rank,
                            "tid": 1,
                            "ts": ts + 1,
                            "dur": 18.0,
                            "args": {"External id": corr},
                        }
                    )
                    emit(
                        {
                            "ph": "X",
                            "cat": "kernel",
                            "pid": 0,
                            "tid": 7,
                            "ts": ts + 5,
                            "dur": 25.0,
                            "name": NCCL_KERNEL,
                            "args": {"correlation": corr, "stream": 7, "device": rank},
                        }
                    )
                    ts += 32
                    corr += 1
            emit(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"ProfilerStep#{step}",
                    "pid": rank,
                    "tid": 1,
                    "ts": step_start,
                    "dur": ts - step_start,
                }
            )
            step += 1
            ts += 50
        fh.write('\n  ],\n  "traceName": "synthetic"\n}\n')
    return n


def tree_memory_bytes(pid: int, with_pss: bool = True) -> tuple[int, int]:
    """Memory of ``pid`` and all its descendants (Linux /proc): the sum of their resident sets (a page the forked
    trace readers share with their parent counts once per process) and of their proportional sets (PSS: a shared
    page split between the processes sharing it, so the tree's own footprint)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    rss = pss = 0
    stack = [pid]
    while stack:
        p = stack.pop()
        stack.extend(children.get(p, []))
        try:  # smaps_rollup walks the page tables (costly for GBs): read only when PSS is asked for
            with open(f"/proc/{p}/smaps_rollup" if with_pss else f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith(("Rss:", "VmRSS:")):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
        except OSError:
            pass
    return rss, pss


HTA = r"""
import json, sys
from hta.trace_analysis import TraceAnalysis
folder = sys.argv[1].rsplit("/", 1)[0]
analyzer = TraceAnalysis(trace_dir=folder)
frames = analyzer.t.get_all_traces()
count = sum(int(df["name"].map(analyzer.t.symbol_table.get_sym_table().__getitem__).str.contains("AllReduce").sum())
            for df in frames.values())
print(json.dumps({"allreduce_kernels": count}))
"""


def measure(code: str, files: list[Path], src: Path = ROOT / "src") -> tuple[float, float, int, dict]:
    """(wall s, CPU s of the process and its children, peak RSS sum and peak PSS of the tree, the counts)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    cpu_before = children_cpu()
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, files)], stdout=subprocess.PIPE, env=env)
    peak_rss = peak_pss = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_rss, peak_pss
        tick = 0
        while not done.is_set():  # RSS every 50 ms; PSS (which costs CPU to read) every 0.5 s
            rss, pss = tree_memory_bytes(proc.pid, with_pss=tick % 10 == 0)
            peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
            tick += 1
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    cpu = children_cpu() - cpu_before
    if proc.returncode != 0:
        raise SystemExit(f"benchmark process failed ({proc.returncode})")
    return seconds, cpu, peak_rss, peak_pss, json.loads(out.decode().strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, help="existing folder of per-rank traces (else one is generated)")
    parser.add_argument("--mb-per-rank", type=int, default=250)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="generate into this folder and keep it (reuse with --folder)")
    parser.add_argument("--also-src", type=Path, help="another verifylab src/ to measure in the same run (before)")
    parser.add_argument(
        "--repeats", type=int, default=1, help="measure the msgspec reference and verifylab this many times, in turn"
    )
    args = parser.parse_args()
    tmp = None
    if args.folder:
        files = sorted(p for p in args.folder.iterdir() if p.name.endswith((".json", ".json.gz")))
    else:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            folder = args.keep
        else:
            tmp = tempfile.TemporaryDirectory(prefix="verifylab-trace-bench-")
            folder = Path(tmp.name)
        files = []
        for rank in range(args.ranks):
            path = folder / f"bench-TP-{rank}.trace.json"
            events = write_rank_trace(path, rank, args.mb_per_rank << 20)
            files.append(path)
            print(f"generated {path.name}: {path.stat().st_size / 1e6:.0f} MB, {events:,} events", flush=True)
    total_mb = sum(f.stat().st_size for f in files) / 1e6
    rows = [("json.load + naive pass", *measure(NAIVE, files))]
    rows.append(("msgspec reference (typed, file whole)", *measure(REFERENCE, files)))
    if args.also_src:
        rows.append((f"verifylab ({args.also_src})", *measure(OURS, files, args.also_src)))
    rows.append(("verifylab trace summarize", *measure(OURS, files)))
    try:
        import hta  # noqa: F401

        rows.append(("Holistic Trace Analysis", *measure(HTA, files)))
    except ImportError:
        print("Holistic Trace Analysis: not installed here (pip install HolisticTraceAnalysis to compare)")
    print(f"\ntrace folder: {len(files)} files, {total_mb:.0f} MB, {os.cpu_count()} CPUs")
    print(f"{'approach':<44} {'wall s':>7} {'CPU s':>7} {'peak RSS':>10} {'peak PSS':>10} {'MB/s':>7}  counts")
    for name, wall, cpu, rss, pss, counts in rows:
        print(
            f"{name:<44} {wall:>7.1f} {cpu:>7.1f} {rss / 1e9:>7.2f} GB {pss / 1e9:>7.2f} GB "
            f"{total_mb / wall:>7.0f}  {counts}"
        )
    print("(RSS: the processes' resident sets added up; PSS: shared pages split between the processes sharing them)")
    naive = rows[0]
    ours = next(r for r in rows if r[0] == "verifylab trace summarize")
    print(f"verifylab vs json.load: {naive[1] / ours[1]:.2f}x faster (wall), memory (PSS) {ours[4] / naive[4]:.2f}x")
    reference = rows[1]
    print(
        f"verifylab / msgspec reference: CPU {ours[2] / reference[2]:.2f}x, peak RSS {ours[3] / reference[3]:.2f}x, "
        f"peak PSS {ours[4] / reference[4]:.2f}x (goal: at most 2x each)"
    )
    if args.also_src:
        print(
            f"verifylab vs {args.also_src}: {rows[2][1] / ours[1]:.2f}x faster (wall), "
            f"{rows[2][2] / ours[2]:.2f}x less CPU"
        )
    same = len({r[5]["allreduce_kernels"] for r in rows}) == 1
    print(f"all-reduce counts agree: {same}")
    if args.repeats > 1:  # the CPU ratio's median over pairs measured back to back (the host's speed drifts)
        ratios = [ours[2] / reference[2]]
        for _ in range(args.repeats - 1):
            again = measure(REFERENCE, files), measure(OURS, files)
            ratios.append(again[1][1] / again[0][1])
        shown = ", ".join(f"{r:.2f}" for r in ratios)
        median = statistics.median(ratios)
        print(f"verifylab / msgspec reference, CPU, {args.repeats} pairs: {shown}; median {median:.2f}x (goal: 2x)")
    if tmp:
        tmp.cleanup()
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
