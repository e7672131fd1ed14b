"""One verify pass predicted from its compute and a measured all-reduce latency curve — no constant fitted to
the pass. Curves come from a stored run (``allreduce_latency``), a CSV (``path, impl, tokens, us``) or the stdout
of nccl-tests' ``all_reduce_perf``; they are interpolated by message size (k x hidden x 2 bytes).

``compute_ms`` is the pass without communication but *with* SGLang's separate add+RMSNorm kernels (what a
``compute_only`` synthetic pass measures). Then, with ``n`` all-reduces and latency ``L(k)``:
``nccl`` = compute + n L_nccl; ``one_allreduce_per_layer`` = compute + n/2 L_nccl (norms kept); ``fused`` =
compute - n x norm + n L_fused (FlashInfer's kernel does the norm); ``compute_only`` = compute.
"""

from __future__ import annotations

import math

from verifylab.errors import ModelInputError
from verifylab.model.inputs.curves import Curve
from verifylab.vocab import KIMI_K2_ALLREDUCES_PER_PASS, KIMI_K2_HIDDEN, allreduce_message_bytes

PASS_VARIANTS = ("compute_only", "nccl", "fused", "one_allreduce_per_layer")


def predict_pass(
    compute_ms: float,
    tokens: float,
    curves: list[Curve],
    path: str,
    norm_us: float,
    allreduces: int = KIMI_K2_ALLREDUCES_PER_PASS,
    hidden: int = KIMI_K2_HIDDEN,
    factors: dict[str, float] | None = None,
    unfused_us: float | None = None,
) -> list[dict]:
    """Every variant's pass (ms) on ``path``; a variant without a curve there gets ``pass_ms`` None and why.
    ``factors`` (impl -> in-pass / isolated) price each all-reduce as it runs inside a pass; ``unfused_us``, one
    unfused all-reduce as the box runs it inside a pass (e.g. SGLang's custom all-reduce, read from a trace),
    replaces the NCCL curve for the unfused variants."""
    checks = [("compute-ms", compute_ms, False), ("tokens", tokens, False), ("norm-us", norm_us, True)]
    if unfused_us is not None:
        checks.append(("unfused-us", unfused_us, False))
    for name, value, zero_ok in checks:
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
            raise ModelInputError(f"--{name} {value!r}: a finite number {'>= 0' if zero_ok else '> 0'}")
    if allreduces < 0:
        raise ModelInputError(f"--allreduces {allreduces}: a count >= 0")
    size = allreduce_message_bytes(tokens, hidden)
    factors = factors or {}
    latency = {c.impl: c.at(size) * factors.get(c.impl, 1.0) for c in curves if c.path == path}
    if unfused_us is not None:
        latency["nccl"] = unfused_us
    norms_ms = allreduces * norm_us / 1e3
    out = []
    for variant in PASS_VARIANTS:
        row = {"name": variant, "path": path, "tokens": tokens, "compute_ms": compute_ms, "reason": ""}
        if variant == "compute_only":
            row |= {"allreduce_ms": 0.0, "norm_ms": norms_ms, "pass_ms": compute_ms}
        elif variant == "fused" and "fused" not in latency:
            row |= {"allreduce_ms": None, "norm_ms": None, "pass_ms": None}
            row["reason"] = f"no fused curve for path {path!r} (FlashInfer's fused kernel needs P2P)"
        elif variant != "fused" and "nccl" not in latency:
            row |= {"allreduce_ms": None, "norm_ms": None, "pass_ms": None}
            row["reason"] = f"no nccl curve for path {path!r}"
        elif variant == "fused":
            ar = allreduces * latency["fused"] / 1e3  # the kernel does add + RMSNorm as well
            row |= {"allreduce_ms": ar, "norm_ms": 0.0, "pass_ms": compute_ms - norms_ms + ar}
        else:
            n = allreduces if variant == "nccl" else allreduces / 2
            ar = n * latency["nccl"] / 1e3
            row |= {"allreduce_ms": ar, "norm_ms": norms_ms, "pass_ms": compute_ms + ar}
        out.append(row)
    return out


def fused_saving_us(
    curves: list[Curve],
    path: str,
    message_bytes: float,
    norm_us: float,
    allreduces: int,
    factors: dict[str, float],
    unfused_us: float | None = None,
) -> float:
    """What fusing ``allreduces`` all-reduces of ``message_bytes`` saves per pass (µs; a loss is negative): the
    nccl variant of :func:`predict_pass` less its fused one (the compute, the same in both, cancels)."""
    passes = predict_pass(
        1.0, 1.0, curves, path, norm_us, allreduces, int(message_bytes // 2), factors, unfused_us
    )  # the message as one row of bf16 values
    by_name = {p["name"]: p["pass_ms"] for p in passes}
    if by_name["nccl"] is None or by_name["fused"] is None:
        raise ModelInputError(f"no NCCL and fused curves on path {path!r} to price fusion's saving with")
    return 1e3 * (by_name["nccl"] - by_name["fused"])
