"""How one rank times a collective: ``replays`` samples of ``calls`` back-to-back calls, each sample started
after a barrier, timed with CUDA events on GPUs (the calls captured in one CUDA graph, as SGLang replays its
decode, or launched eagerly) and with the wall clock on CPU. A sample is per-call microseconds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum


class Mode(StrEnum):
    """How the timed calls are launched."""

    GRAPH = "graph"  # captured once in a CUDA graph, then replayed (SGLang's decode and verify)
    EAGER = "eager"  # launched from Python each time (SGLang with --disable-cuda-graph, prefill)


@dataclass
class RankSample:
    """One rank's samples of one (implementation, group, mode, size) cell."""

    impl: str
    group: str
    mode: Mode
    tokens: int
    message_bytes: int
    samples_us: list[float] = field(default_factory=list)
    rel_err: float | None = None
    note: str = ""
    correct: bool | None = None  # checked against the exact result before timing (None: not checked)

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples_us) if self.samples_us else float("nan")

    def to_dict(self) -> dict:
        out = asdict(self)
        out["mode"] = str(self.mode)
        out["median_us"] = self.median_us
        return out


def time_samples(
    run: Callable[[], object], calls: int, replays: int, barrier: Callable[[], object], cuda: bool
) -> list[float]:
    """Per-call microseconds of ``replays`` runs of ``run`` (which makes ``calls`` calls), each after a barrier."""
    samples = []
    if cuda:
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(replays):
            barrier()
            start.record()
            run()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3 / calls)
        return samples
    for _ in range(replays):
        barrier()
        began = time.perf_counter()
        run()
        samples.append((time.perf_counter() - began) * 1e6 / calls)
    return samples


CHECK_TOLERANCE = {"bfloat16": 2e-2, "float32": 1e-4}  # relative error: ~10x what a correct sum's rounding gives


def relative_error(got, expected) -> float:
    """``|got - expected| / |expected|`` in float64 (0 when both are zero)."""
    diff = (got.double() - expected.double()).norm()
    scale = expected.double().norm()
    return float(diff / scale) if float(scale) > 0 else float(diff)
