"""What ``verifylab comm probe`` itself costs, and how that grows with message sizes and GPUs.

    PYTHONPATH=src python benchmarks/comm_probe_cost.py                 # every visible GPU (>= 2), NCCL
    PYTHONPATH=src python benchmarks/comm_probe_cost.py --gpus 2,4,8    # several world sizes on a larger box
    python benchmarks/comm_probe_cost.py --backend gloo --gpus 2,4      # the mechanics on CPU processes

Every probe is timed end to end as a user meets it (processes started, NCCL set up, peer copies, every size in a
CUDA graph and eager, torn down). The reference, measured in the same run, is the smallest probe that still does
all of that: one size, three samples. Each row prints its wall time and its ratio to that reference, so the
growth is visible apart from the machine's start-up costs. FlashInfer's kernels are left out (``--no-extra``)
unless ``--extra``: their first use compiles a JIT module that is a one-time cost, not the probe's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from verifylab.comm.config import ProbeConfig, default_tokens  # noqa: E402
from verifylab.comm.probe import run_probe  # noqa: E402


def timed_probe(cfg: ProbeConfig) -> tuple[float, dict[str, float]]:
    """Wall seconds of one probe and the probe's own phase seconds."""
    with tempfile.TemporaryDirectory(prefix="probe-cost-") as tmp:
        began = time.monotonic()
        raw = run_probe(cfg, Path(tmp))
        return time.monotonic() - began, raw.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", default="", help="world sizes to probe, comma-separated (default: all visible)")
    parser.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    parser.add_argument("--extra", action="store_true", help="include FlashInfer's kernels (JIT cached first)")
    args = parser.parse_args()
    if args.backend == "nccl":
        import torch

        visible = torch.cuda.device_count()
        worlds = [int(w) for w in args.gpus.split(",")] if args.gpus else [visible]
    else:
        worlds = [int(w) for w in args.gpus.split(",")] if args.gpus else [2]
    sizes = default_tokens()
    doubled = sorted(set(sizes) | {t * 3 // 2 for t in sizes if t > 1})  # about twice as many sizes

    def cfg(world: int, tokens: list[int], replays: int = 15, extra: bool = args.extra) -> ProbeConfig:
        where = {"gpus": list(range(world))} if args.backend == "nccl" else {"ranks": world}
        return ProbeConfig(backend=args.backend, tokens=tokens, replays=replays, extra_impls=extra, **where)

    print(f"{'probe':<44} {'world':>5} {'sizes':>5} {'wall s':>8} {'ranks s':>8} {'x ref':>7}")
    for world in worlds:
        reference, _ = timed_probe(cfg(world, [1], replays=3, extra=False).model_copy(update={"calls": 1}))
        print(
            f"{'reference: 1 size, 3 samples, no FlashInfer':<44} {world:>5} {1:>5} {reference:8.1f} {'':>8} {1.0:7.2f}"
        )
        for name, tokens in (("default sizes", sizes), ("about twice the sizes", doubled)):
            wall, phases = timed_probe(cfg(world, tokens))
            print(
                f"{name:<44} {world:>5} {len(tokens):>5} {wall:8.1f} {phases.get('ranks', 0):8.1f} "
                f"{wall / reference:7.2f}"
            )


if __name__ == "__main__":
    main()
