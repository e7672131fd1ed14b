"""Per GPU pair, in one process (``python -m verifylab.comm.peers OUT.json GPU...``): whether CUDA lets one GPU
access the other's memory (``cudaDeviceCanAccessPeer``), and a small and a large device-to-device copy: the
latency of a 4 KiB copy and the bandwidth of a 64 MiB one. Where peer access is refused the driver stages the
copy through host memory, and the numbers show it."""

from __future__ import annotations

import statistics
import sys
from itertools import permutations
from pathlib import Path

from verifylab.iorw import atomic_write_json

SMALL_BYTES = 4 << 10
LARGE_BYTES = 64 << 20
SMALL_COPIES, LARGE_COPIES = 50, 8


def _timed_copies(dst, src, copies: int) -> list[float]:
    """Microseconds per copy, each timed alone with events on the source device's stream."""
    import torch

    with torch.cuda.device(src.device):
        dst.copy_(src)  # warm-up: enables peer access lazily, allocates staging buffers
        torch.cuda.synchronize(src.device)
        torch.cuda.synchronize(dst.device)
        times = []
        for _ in range(copies):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src, non_blocking=True)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
    return times


def _pattern(size: int, device: int):
    """Bytes that differ from their neighbours (0..250 repeating): a copy that drops or shifts them shows."""
    import torch

    return (torch.arange(size, dtype=torch.int32, device=f"cuda:{device}") % 251).to(torch.uint8)


def measure_pairs(gpus: list[int]) -> list[dict]:
    """One row per ordered pair (src, dst): peer access, copy latency (µs) and bandwidth (GB/s)."""
    import torch

    rows = []
    for src, dst in permutations(gpus, 2):
        can = bool(torch.cuda.can_device_access_peer(src, dst))
        small_src = _pattern(SMALL_BYTES, src)
        small_dst = torch.empty(SMALL_BYTES, dtype=torch.uint8, device=f"cuda:{dst}")
        large_src = _pattern(LARGE_BYTES, src)
        large_dst = torch.empty(LARGE_BYTES, dtype=torch.uint8, device=f"cuda:{dst}")
        latency = statistics.median(_timed_copies(small_dst, small_src, SMALL_COPIES))
        large_us = statistics.median(_timed_copies(large_dst, large_src, LARGE_COPIES))
        correct = bool(torch.equal(small_dst.cpu(), small_src.cpu()) and torch.equal(large_dst.cpu(), large_src.cpu()))
        rows.append(
            {
                "src": src,
                "dst": dst,
                "can_access_peer": can,
                "copy_latency_us": latency,
                "copy_bandwidth_gbs": LARGE_BYTES / (large_us * 1e-6) / 1e9,
                "copy_small_bytes": SMALL_BYTES,
                "copy_large_bytes": LARGE_BYTES,
                "copy_correct": correct,  # the bytes arrived as sent (a broken peer path can copy garbage)
            }
        )
        del small_src, small_dst, large_src, large_dst
    return rows


def main(argv: list[str] | None = None) -> int:
    out, *gpus = argv or sys.argv[1:]
    atomic_write_json(Path(out), {"pairs": measure_pairs([int(g) for g in gpus])})
    return 0


if __name__ == "__main__":
    sys.exit(main())
