"""On the GPU box (issue #83): SGLang's verify kernels called as its Triton backend and FlashInfer call them on an
EAGLE-3 chain (topk 1), one attention layer, each checked against an fp32 reference before it is timed.

For each shape (``predict.py``'s: MLA with 16 and 8 query heads per GPU, dense GQA 32/8), context and stream count:
the same random KV and draft queries (teacher-forced: the chain's own keys and values are in the cache after the
prefix), then per kernel

- ``serial``: ``extend_attention_fwd`` (what SGLang runs by default for an MLA model off SM90/SM100);
- ``split-kv``: ``verify_splitkv_fwd``, called directly (SGLang switches it on for AMD gfx95 only; no port: the same
  Triton source, NVIDIA launch arguments as the file chooses them), ``refused`` where its ``can_handle`` says no;
- ``flashinfer-fa2`` / ``flashinfer-fa3`` (MLA: ``BatchMLAPagedAttentionWrapper``, fa2 is what SM120 runs) and
  ``flashinfer`` (dense: ``BatchPrefillWithPagedKVCacheWrapper``), the draft tokens' KV paged after the prefix.

Correctness: at every draft position, ||out - ref|| / ||ref|| over streams and heads against an fp32 torch reference
of the same causal chain, the output poisoned with NaN before each call; the verdict is ``pass`` within
:data:`TOLERANCE`. Timing only for kernels that pass: CUDA events, warm-ups, the median of the repeats. One JSON
line per (shape, kernel, context, streams) is appended to ``--out`` as it is measured; a deadline stops the grid where
it is (what is not reached is named by its absence).

    python benchmarks/verify_kernels/measure.py --out /tmp/vk/cells.jsonl --deadline-s 420
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
TOLERANCE = 2e-2  # bf16 inputs and output: ||out - ref|| / ||ref|| of a right kernel lands near 4e-3
CONTEXTS = (2048, 16384, 32768, 65536)
STREAMS = (1, 4, 16)
K = 4  # draft tokens verified at once
SHAPES = {  # name -> (mla, q_heads, kv_heads, qk_dim, v_dim, sm_scale)
    "mla16": (True, 16, 1, 576, 512, 1 / math.sqrt(192)),
    "mla8-kimi": (True, 8, 1, 576, 512, 1 / math.sqrt(192)),
    "dense": (False, 32, 8, 128, 128, 1 / math.sqrt(128)),
}
KERNELS = {
    True: ("serial", "split-kv", "flashinfer-fa2", "flashinfer-fa3"),
    False: ("serial", "split-kv", "flashinfer"),
}


class Case:
    """One layer's verify: ``streams`` chains of ``K`` draft tokens after ``context`` tokens of prefix each."""

    def __init__(self, shape: str, context: int, streams: int, seed: int = 0) -> None:
        mla, hq, hkv, dqk, dv, scale = SHAPES[shape]
        self.mla, self.hq, self.hkv, self.dqk, self.dv, self.scale = mla, hq, hkv, dqk, dv, scale
        self.context, self.streams = context, streams
        dev, g = "cuda", torch.Generator(device="cuda").manual_seed(seed)
        per = context + K
        n = 1 + streams * per  # slot 0 unused, as SGLang's pool keeps it
        self.k_buffer = torch.randn(n, hkv, dqk, generator=g, device=dev, dtype=torch.bfloat16)
        self.v_buffer = (
            self.k_buffer[..., :dv] if mla else torch.randn(n, hkv, dv, generator=g, device=dev, dtype=torch.bfloat16)
        )
        starts = 1 + torch.arange(streams, device=dev) * per
        self.prefix_idx = (starts[:, None] + torch.arange(context, device=dev)[None, :]).reshape(-1)
        self.draft_idx = (starts[:, None] + context + torch.arange(K, device=dev)[None, :]).reshape(-1)
        self.all_idx = (starts[:, None] + torch.arange(per, device=dev)[None, :]).reshape(-1)
        self.q = torch.randn(streams * K, hq, dqk, generator=g, device=dev, dtype=torch.bfloat16)
        self.k_extend = self.k_buffer[self.draft_idx].contiguous()
        self.v_extend = self.v_buffer[self.draft_idx].contiguous()
        i32 = dict(dtype=torch.int32, device=dev)
        self.qo_indptr = torch.arange(0, streams + 1, **i32) * K
        self.kv_indptr = torch.arange(0, streams + 1, **i32) * context
        self.kv_indices = self.prefix_idx.to(torch.int64)
        mask = torch.ones(K, per, dtype=torch.bool, device=dev)
        mask[:, context:] = torch.tril(torch.ones(K, K, dtype=torch.bool, device=dev))
        self.custom_mask = mask.reshape(-1).repeat(streams)
        self.mask_indptr = torch.arange(0, streams + 1, **i32) * (K * per)

    def reference(self) -> torch.Tensor:
        """fp32 attention of every draft position over its prefix and the chain up to itself."""
        out = torch.empty(self.streams * K, self.hq, self.dv, dtype=torch.float32, device="cuda")
        group = self.hq // self.hkv
        causal = torch.ones(K, self.context + K, dtype=torch.bool, device="cuda")
        causal[:, self.context :] = torch.tril(torch.ones(K, K, dtype=torch.bool, device="cuda"))
        for s in range(self.streams):
            rows = self.all_idx[s * (self.context + K) : (s + 1) * (self.context + K)]
            keys = self.k_buffer[rows].float().repeat_interleave(group, dim=1)  # [T, hq, dqk]
            values = self.v_buffer[rows].float().repeat_interleave(group, dim=1)
            q = self.q[s * K : (s + 1) * K].float()  # [K, hq, dqk]
            scores = torch.einsum("khd,thd->hkt", q, keys) * self.scale
            scores = scores.masked_fill(~causal[None], float("-inf"))
            out[s * K : (s + 1) * K] = torch.einsum("hkt,thd->khd", scores.softmax(-1), values)
        return out

    def poisoned(self) -> torch.Tensor:
        return torch.full((self.streams * K, self.hq, self.dv), float("nan"), dtype=torch.bfloat16, device="cuda")


def runner(kernel: str, case: Case):
    """A callable writing the kernel's output into a fresh poisoned tensor and returning it, or a refusal string."""
    if kernel == "serial":
        from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

        def run():
            o = case.poisoned()
            extend_attention_fwd(case.q, case.k_extend, case.v_extend, o, case.k_buffer, case.v_buffer,
                                 case.qo_indptr, case.kv_indptr, case.kv_indices, case.custom_mask, True,
                                 case.mask_indptr, K, 1.0, 1.0, case.scale)  # fmt: skip
            return o

        return run
    if kernel == "split-kv":
        from sglang.kernels.ops.attention.verify_splitkv import verify_splitkv_fwd

        probe = case.poisoned()
        ran = verify_splitkv_fwd(case.q, case.k_extend, case.v_extend, probe, case.k_buffer, case.v_buffer,
                                 case.qo_indptr, case.kv_indptr, case.kv_indices, case.custom_mask, True,
                                 case.mask_indptr, K, 1.0, 1.0, case.scale, max_bs=case.streams)  # fmt: skip
        if not ran:
            return "refused by can_handle"

        def run():
            o = case.poisoned()
            verify_splitkv_fwd(case.q, case.k_extend, case.v_extend, o, case.k_buffer, case.v_buffer,
                               case.qo_indptr, case.kv_indptr, case.kv_indices, case.custom_mask, True,
                               case.mask_indptr, K, 1.0, 1.0, case.scale, max_bs=case.streams)  # fmt: skip
            return o

        return run
    import flashinfer

    workspace = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    i32 = dict(dtype=torch.int32, device="cuda")
    kv_len = torch.full((case.streams,), case.context + K, **i32)
    kv_indptr = torch.arange(0, case.streams + 1, **i32) * (case.context + K)
    kv_indices = case.all_idx.to(torch.int32)
    if case.mla:
        wrapper = flashinfer.mla.BatchMLAPagedAttentionWrapper(workspace, backend=kernel.split("-")[1])
        wrapper.plan(case.qo_indptr, kv_indptr, kv_indices, kv_len, case.hq, 512, 64, 1, True, case.scale,
                     torch.bfloat16, torch.bfloat16)  # fmt: skip
        ckv = case.k_buffer[:, 0, :512].contiguous().view(-1, 1, 512)
        kpe = case.k_buffer[:, 0, 512:].contiguous().view(-1, 1, 64)
        q_nope, q_pe = case.q[..., :512].contiguous(), case.q[..., 512:].contiguous()

        def run():
            o = case.poisoned()
            wrapper.run(q_nope, q_pe, ckv, kpe, out=o)
            return o

        return run
    wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD")
    last = torch.ones(case.streams, **i32)
    wrapper.plan(case.qo_indptr, kv_indptr, kv_indices, last, case.hq, case.hkv, case.dqk, 1, causal=True,
                 sm_scale=case.scale, q_data_type=torch.bfloat16)  # fmt: skip
    cache = (case.k_buffer.view(-1, 1, case.hkv, case.dqk), case.v_buffer.view(-1, 1, case.hkv, case.dv))

    def run():
        o = case.poisoned()
        wrapper.run(case.q, cache, out=o)
        return o

    return run


def check(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, int]:
    """The worst relative error over draft positions, and how many output elements were never written (NaN)."""
    unwritten = int(torch.isnan(out).sum())
    errors = []
    for i in range(K):
        o, r = out[i::K].float(), ref[i::K]
        errors.append(float(torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r)))
    return max(errors), unwritten


def timed(run, budget_ms: float = 150.0) -> tuple[float, int]:
    """Median ms of one call (CUDA events), after warm-ups; as many repeats as fit ``budget_ms`` (3 to 50)."""
    for _ in range(2):
        run()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    torch.cuda.synchronize()
    one = max(start.elapsed_time(end), 1e-3)
    reps = int(min(50, max(3, budget_ms / one)))
    times = []
    for _ in range(reps):
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2], reps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deadline-s", type=float, default=420.0)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--kernels", default="", help="comma-separated; default: every kernel of the shape")
    args = parser.parse_args()
    began = time.monotonic()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if args.out.exists():
        done = {(r["shape"], r["kernel"], r["context"], r["streams"]) for r in map(json.loads, args.out.open())}
    for shape in args.shapes.split(","):
        kernels = [k for k in KERNELS[SHAPES[shape][0]] if not args.kernels or k in args.kernels.split(",")]
        for context in CONTEXTS:
            for streams in STREAMS:
                if time.monotonic() - began > args.deadline_s:
                    print(f"deadline reached at {shape} {context} x {streams}", flush=True)
                    return 0
                todo = [k for k in kernels if (shape, k, context, streams) not in done]
                if not todo:
                    continue
                case = Case(shape, context, streams)
                ref = case.reference()
                for kernel in todo:
                    row = {"shape": shape, "kernel": kernel, "context": context, "streams": streams, "k": K}
                    try:
                        run = runner(kernel, case)
                        if isinstance(run, str):
                            row.update(verdict="refused", note=run)
                        else:
                            error, unwritten = check(run(), ref)
                            torch.cuda.synchronize()
                            ok = error <= TOLERANCE and unwritten == 0 and math.isfinite(error)
                            row.update(worst_rel_error=error, unwritten=unwritten, tolerance=TOLERANCE,
                                       verdict="pass" if ok else "fail")  # fmt: skip
                            if ok:
                                row["ms"], row["repeats"] = timed(run)
                    except Exception as exc:  # a kernel that cannot run here is a result, not the end of the grid
                        row.update(verdict="error", note=f"{type(exc).__name__}: {str(exc)[:300]}")
                        traceback.print_exc()
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)
                del case, ref
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
