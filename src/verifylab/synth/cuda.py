"""CUDA-graph capture shared by the synthetic pass and the GPU benchmarks."""

from __future__ import annotations

from collections.abc import Callable


def capture_graph(fn: Callable[[], object], calls: int = 1, warmup: int = 1):
    """Warm ``fn`` up on a side stream (lazy init, JIT, NCCL setup), then capture ``calls`` calls in a graph."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph
