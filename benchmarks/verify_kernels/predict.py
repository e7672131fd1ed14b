"""The model's prediction for the verify-kernel runs (issue #83), written before they run and committed: per kernel,
attention shape, context and stream count, one layer's verify attention on one H200 (ms, a range), from
``verifylab.model.pricing.verify_kernels`` with the serial rate fitted on the stored engine runs
(``verifylab.model.fits.verify_kernels``) and the H200's measured copy bandwidth.

    python benchmarks/verify_kernels/predict.py   # writes predicted.csv (kernels) and predicted-engine.csv (servers)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

from verifylab.model.fits.verify_kernels import serial_rate  # noqa: E402
from verifylab.model.inputs.gpus import GPU_TABLE, gpu_named  # noqa: E402
from verifylab.model.inputs.stored import stored_inputs  # noqa: E402
from verifylab.model.pricing.verify_kernels import VerifyKernel, attention_shape, verify_layer_ms  # noqa: E402
from verifylab.store.evidence import Evidence  # noqa: E402

CONTEXTS = (2048, 16384, 32768, 65536)
STREAMS = (1, 4, 16)
QUERY_TOKENS = 4  # an EAGLE-3 chain of 4 draft tokens verified at once (topk 1), as the engine runs measured
# The shapes measured: the stored runs' MLA (DeepSeek-V2-Lite, 16 heads at TP 1) and dense (Llama-3-8B) targets, and
# Kimi-K2.5's MLA layer as one GPU of TP 8 holds it (8 heads).
KIMI = ROOT / "examples" / "configs" / "kimi-k2.5-int4" / "config.json"
# (kernel as run, the model's kernel): FlashInfer's MLA kernel both as SM90 picks it (fa3) and as SM120 does (fa2)
RUNS = {
    "mla": [("serial", "serial"), ("split-kv", "split-kv"), ("flashinfer-fa2", "flashinfer"),
            ("flashinfer-fa3", "flashinfer")],
    "dense": [("serial", "serial"), ("split-kv", "split-kv"), ("flashinfer", "flashinfer")],
}  # fmt: skip


def shapes(ev: Evidence) -> dict[str, tuple[str, dict, int]]:
    """name -> (family, config, tp)."""
    run = ev.measured.run("20261205-023005-h200-engine-context")
    configs = {k: v["target"] for k, v in run.parameters["configs"].items()}
    return {
        "mla16": ("mla", configs["mla"], 1),
        "mla8-kimi": ("mla", json.loads(KIMI.read_text()), 8),
        "dense": ("dense", configs["dense"], 1),
    }


def predictions(ev: Evidence) -> pd.DataFrame:
    fitted = serial_rate(ev.measured)
    if fitted is None:
        sys.exit("no stored engine-context runs: nothing to fit the serial rate on")
    rate = fitted[0]
    ceilings = stored_inputs(ev).runs.ceilings
    gpu = gpu_named("h200", ceilings if ceilings is not None and ceilings.gpu == "h200" else None)
    sms = GPU_TABLE["h200"].sms
    rows = []
    for name, (family, config, tp) in shapes(ev).items():
        shape = attention_shape(config, tp)
        for run_kernel, model_kernel in RUNS[family]:
            for context in CONTEXTS:
                for streams in STREAMS:
                    ms = verify_layer_ms(VerifyKernel(model_kernel), shape, context, streams, gpu, sms, rate)
                    rows.append(
                        {
                            "shape": name,
                            "kernel": run_kernel,
                            "context": context,
                            "streams": streams,
                            "query_tokens": QUERY_TOKENS,
                            "q_heads": shape.q_heads,
                            "kv_heads": shape.kv_heads,
                            "qk_dim": shape.qk_dim,
                            "v_dim": shape.v_dim,
                            "predicted_low_ms": round(ms.low, 6),
                            "predicted_high_ms": round(ms.high, 6),
                            "model_kernel": model_kernel,
                        }
                    )
    return pd.DataFrame(rows)


ENGINE_CONTEXTS = (2048, 65536)
ENGINE_SHAPES = {"mla": 12, "mla36": 36}  # benchmarks/engine_reads/make_models.py's MLA targets and their depths
ENGINE_KERNEL = {"triton": "serial", "flashinfer": "flashinfer", "triton-splitkv": "split-kv"}  # what verifies a chain


def engine_predictions(ev: Evidence) -> pd.DataFrame:
    """The engine-level minimum grid: how much an EAGLE-3 cycle of one stream grows from 2k to 64k tokens of
    context (ms) per backend and target depth: every layer's verify attention priced by its kernel (the draft's own
    small attention left out)."""
    fitted = serial_rate(ev.measured)
    if fitted is None:
        sys.exit("no stored engine-context runs: nothing to fit the serial rate on")
    rate, stored_shapes, _ = fitted
    ceilings = stored_inputs(ev).runs.ceilings
    gpu = gpu_named("h200", ceilings if ceilings is not None and ceilings.gpu == "h200" else None)
    sms, shape = GPU_TABLE["h200"].sms, stored_shapes["mla"]
    rows = []
    for name, layers in ENGINE_SHAPES.items():
        for backend, kernel in ENGINE_KERNEL.items():
            low, high = (verify_layer_ms(VerifyKernel(kernel), shape, c, 1, gpu, sms, rate) for c in ENGINE_CONTEXTS)
            rows.append(
                {
                    "shape": name,
                    "layers": layers,
                    "backend": backend,
                    "mode": "eagle3",
                    "streams": 1,
                    "context_low": ENGINE_CONTEXTS[0],
                    "context_high": ENGINE_CONTEXTS[1],
                    "growth_low_ms": round((high.low - low.high) * layers, 4),
                    "growth_high_ms": round((high.high - low.low) * layers, 4),
                    "kernel": kernel,
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    ev = Evidence(ROOT / "data")
    for frame, target in (
        (predictions(ev), HERE / "predicted.csv"),
        (engine_predictions(ev), HERE / "predicted-engine.csv"),
    ):
        frame.to_csv(target, index=False, lineterminator="\n")
        print(f"{len(frame)} predictions -> {target}")


if __name__ == "__main__":
    main()
