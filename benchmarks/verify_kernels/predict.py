"""The model's prediction for the verify-kernel runs (issue #83), written before they run and committed: per kernel,
attention shape, context and stream count, one layer's verify attention on one H200 (ms, a range), from
``verifylab.model.pricing.verify_kernels`` with the serial rate fitted on the stored engine runs
(``verifylab.model.fits.verify_kernels``) and the H200's measured copy bandwidth.

    python benchmarks/verify_kernels/predict.py            # writes benchmarks/verify_kernels/predicted.csv
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


def main() -> None:
    frame = predictions(Evidence(ROOT / "data"))
    target = HERE / "predicted.csv"
    frame.to_csv(target, index=False, lineterminator="\n")
    print(f"{len(frame)} predictions -> {target}")


if __name__ == "__main__":
    main()
