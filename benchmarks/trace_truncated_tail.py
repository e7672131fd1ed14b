"""How soon `verifylab trace summarize` reports a last rank cut short, against summarizing the whole folder, same
files, same run (issue 71: a cut tail was found only after every rank was read).

    python benchmarks/trace_truncated_tail.py [--ranks 8] [--mb-per-rank 100] [--keep DIR]

Generates per-rank traces shaped like PyTorch profiler output (the generator of ``trace_throughput.py``), times the
summary of the whole folder (the reference), then cuts the last rank 300 bytes short of its end and times the
command until it exits naming that file. Prints both wall times, the CPU of each process tree, the load and the
ratio; the goal is a report within 2 s whatever the folder's size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_throughput import write_rank_trace  # the same generator, one place
from tree_cpu import children_cpu

ROOT = Path(__file__).resolve().parents[1]


def timed(args: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU seconds (children) of one command, and its result."""
    before, start = children_cpu(), time.perf_counter()
    result = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - start
    return wall, children_cpu() - before, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--mb-per-rank", type=int, default=100)
    parser.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="trace-tail-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        files = []
        for rank in range(args.ranks):
            path = folder / f"bench-TP-{rank}.trace.json"
            if not path.exists():
                write_rank_trace(path, rank, args.mb_per_rank << 20)
            files.append(path)
        command = [sys.executable, "-m", "verifylab.cli", "trace", "summarize", str(folder)]
        whole_wall, whole_cpu, whole = timed(command)
        if whole.returncode != 0:
            raise SystemExit(f"the whole folder did not summarize: {whole.stderr or whole.stdout}")
        last = files[-1]
        kept = last.read_bytes()
        last.write_bytes(kept[:-300])
        try:
            cut_wall, cut_cpu, cut = timed(command)
        finally:
            last.write_bytes(kept)
        named = cut.returncode != 0 and last.name in (cut.stdout + cut.stderr)
        total_mb = sum(f.stat().st_size for f in files) / 1e6
        print(f"folder: {args.ranks} ranks, {total_mb:,.0f} MB; load {os.getloadavg()[0]:.2f}")
        print(f"whole folder summarized (reference): {whole_wall:.2f} s wall, {whole_cpu:.2f} s CPU")
        print(
            f"last rank cut 300 bytes short, reported: {cut_wall:.2f} s wall, {cut_cpu:.2f} s CPU, file named: {named}"
        )
        print(f"ratio cut / whole: {cut_wall / whole_wall:.3f} (goal: the report within 2 s: {cut_wall <= 2.0})")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
