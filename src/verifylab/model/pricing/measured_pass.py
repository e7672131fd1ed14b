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
from verifylab.model.pricing.pass_cost import PassCost, compare
from verifylab.vocab import KIMI_K2_ALLREDUCES_PER_PASS, KIMI_K2_HIDDEN, allreduce_message_bytes

PASS_VARIANTS = ("compute_only", "nccl", "fused", "one_allreduce_per_layer")


def measured_passes(
    compute_ms: float,
    tokens: float,
    curves: list[Curve],
    path: str,
    norm_us: float,
    allreduces: int = KIMI_K2_ALLREDUCES_PER_PASS,
    hidden: int = KIMI_K2_HIDDEN,
    factors: dict[str, float] | None = None,
    unfused_us: float | None = None,
) -> dict[str, PassCost | str]:
    """Every variant's pass on ``path`` as a record — the measured compute (with its norm kernels; less them where
    the fused kernel does the norm) and the variant's all-reduces — or why it is not priced (no curve there).
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
    out: dict[str, PassCost | str] = {"compute_only": PassCost(tokens, 1, measured_ms=compute_ms, collective="none")}
    if "fused" in latency:  # the kernel does add + RMSNorm as well: the compute's norm kernels go
        ar = allreduces * latency["fused"] / 1e3
        out["fused"] = PassCost(tokens, 1, measured_ms=compute_ms - norms_ms, collectives_ms=ar, collective="fused")
    else:
        out["fused"] = f"no fused curve for path {path!r} (FlashInfer's fused kernel needs P2P)"
    for variant, n in (("nccl", allreduces), ("one_allreduce_per_layer", allreduces / 2)):
        if "nccl" in latency:
            ar = n * latency["nccl"] / 1e3
            out[variant] = PassCost(tokens, 1, measured_ms=compute_ms, collectives_ms=ar, collective="nccl")
        else:
            out[variant] = f"no nccl curve for path {path!r}"
    return {v: out[v] for v in PASS_VARIANTS}


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
    """Every variant's pass (ms) on ``path`` as rows (:func:`measured_passes`); a variant without a curve there gets
    ``pass_ms`` None and why."""
    passes = measured_passes(compute_ms, tokens, curves, path, norm_us, allreduces, hidden, factors, unfused_us)
    norms_ms = allreduces * norm_us / 1e3
    out = []
    for variant, priced in passes.items():
        row = {"name": variant, "path": path, "tokens": tokens, "compute_ms": compute_ms, "reason": ""}
        if isinstance(priced, str):
            row |= {"allreduce_ms": None, "norm_ms": None, "pass_ms": None, "reason": priced}
        else:
            norms = 0.0 if variant == "fused" else norms_ms
            row |= {"allreduce_ms": priced.collectives_ms, "norm_ms": norms, "pass_ms": priced.total_ms}
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
    nccl variant of :func:`measured_passes` against its fused one (the compute, the same in both, cancels)."""
    passes = measured_passes(
        1.0, 1.0, curves, path, norm_us, allreduces, int(message_bytes // 2), factors, unfused_us
    )  # the message as one row of bf16 values
    nccl, fused = passes["nccl"], passes["fused"]
    if isinstance(nccl, str) or isinstance(fused, str):
        raise ModelInputError(f"no NCCL and fused curves on path {path!r} to price fusion's saving with")
    return 1e3 * compare(nccl, fused).saved_ms
