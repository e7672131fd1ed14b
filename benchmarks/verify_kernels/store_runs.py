"""Store what the verify-kernel calls brought back (``cells.jsonl`` and ``box.json`` of ``device_run.sh measure``) as a
run of the run store: ``verify_kernel_cells`` (each kernel's correctness verdict and time), the prediction committed
before the run as the table ``verify_kernel_prediction`` and, byte for byte, as ``prediction/predicted.csv`` with the
commit it was read at (``parameters.prediction``: file, commit; ``tests/test_run_predictions.py`` checks both).

    python benchmarks/verify_kernels/store_runs.py --lease DIR --commit SHA --predicted-at SHA [--note "..."]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from datetime import datetime
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "engine_reads"))
from store_runs import committed_bytes, manifest  # noqa: E402  (the engine runs' store script: one of each)

from verifylab.intake import read_outside_bytes  # noqa: E402
from verifylab.iorw import atomic_write_bytes  # noqa: E402
from verifylab.model.inputs.gpus import gpu_key  # noqa: E402
from verifylab.store.runs import RunStore  # noqa: E402

PREDICTION = "benchmarks/verify_kernels/predicted.csv"
COLUMNS = ["shape", "kernel", "context", "streams", "k", "verdict", "worst_rel_error", "unwritten", "tolerance", "ms",
           "repeats", "note"]  # fmt: skip


def cells(lease: Path) -> pd.DataFrame:
    """The measured cells, a later line of a (shape, kernel, context, streams) winning."""
    text = read_outside_bytes(lease / "cells.jsonl", "record").decode("utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    frame = pd.DataFrame(rows).reindex(columns=COLUMNS)
    frame = frame.drop_duplicates(["shape", "kernel", "context", "streams"], keep="last")
    frame["note"] = frame["note"].astype(object).where(frame["note"].notna(), "").astype(str)
    for column in ("unwritten", "repeats"):
        frame[column] = frame[column].fillna(-1).astype(int)
    return frame.reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lease", type=Path, required=True, help="folder holding cells.jsonl and box.json")
    parser.add_argument("--commit", required=True, help="the commit the run's code was at")
    parser.add_argument("--predicted-at", required=True, help="the commit the prediction file was read at")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    box = json.loads(read_outside_bytes(args.lease / "box.json", "record"))
    name, capability, _driver, _memory = (part.strip() for part in box["nvidia_smi"].split(","))
    started = datetime.fromisoformat(box["started"])
    gpu = gpu_key(name)  # the GPU the lease gave (an H100 or an H200), never assumed
    run_id = f"{started.strftime('%Y%m%d-%H%M%S')}-{gpu}-verify-kernels"
    predicted = committed_bytes(args.predicted_at, PREDICTION)
    measured = cells(args.lease)
    verdicts = measured.groupby(["shape", "kernel"])["verdict"].agg(lambda v: ",".join(sorted(set(v))))
    notes = [
        args.note,
        f"the model's prediction (verify_kernel_prediction) is {PREDICTION} as committed in {args.predicted_at} before "
        f"the run, stored here unchanged (also byte for byte as prediction/predicted.csv)",
        "one attention layer per call, on the same random bf16 KV and draft queries for every kernel; each kernel's "
        "output checked against an fp32 torch reference at every draft position before it was timed (CUDA events, "
        "median of the repeats)",
        "split-kv: SGLang 0.5.17's verify_splitkv_fwd called directly on NVIDIA (SGLang switches it on for AMD gfx95 "
        "only); no port: the same Triton source, the NVIDIA launch arguments the file chooses",
        "flashinfer-fa2 is the MLA kernel FlashInfer picks on SM120; fa3 what it picks on SM90; measured here on SM90, "
        "never run on SM120 (about 100 KB of shared memory per block against 228 KB changes Triton's launch configs)",
        f"the prediction priced an H200 (its measured copy bandwidth); the lease gave {name}: the once-per-pass "
        "kernels' predictions assume about 1.4 times this GPU's bandwidth, the serial kernel's rate its SM count",
        "verdicts per shape and kernel: " + "; ".join(f"{s}/{k}: {v}" for (s, k), v in verdicts.items()),
    ]
    parameters = {
        "prediction": {"file": PREDICTION, "commit": args.predicted_at},
        "triton": box["triton"],
        "sms": box.get("sms"),
    }
    label = (
        f"1 x {name} (SM{capability.replace('.', '')}), SGLang {box['sglang']} and FlashInfer {box['flashinfer']} "
        "verify kernels, one attention layer"
    )
    purpose = "issue #83: SGLang's verify measured per kernel: correct first, then timed"
    run = manifest(run_id, box, "verify-kernels", label, parameters, [n for n in notes if n], args.commit, purpose)
    store = RunStore(ROOT / "data" / "runs")
    store.create(run)
    store.write_table(run_id, "verify_kernel_cells", measured)
    store.write_table(run_id, "verify_kernel_prediction", pd.read_csv(io.BytesIO(predicted)))
    atomic_write_bytes(store.path(run_id) / "prediction" / "predicted.csv", predicted)
    print(run_id)


if __name__ == "__main__":
    main()
