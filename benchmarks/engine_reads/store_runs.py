"""Store what the engine-reads calls brought back (each call's ``reads.tar.gz``, unpacked) as runs of the run store,
one per lease and kind: the context cells (``context_cells``, with the prediction committed before the run as
``context_prediction``) and the expert counts (``expert_counts``, ``verify_chains``, ``expert_prediction``).

A cell whose streams never all decoded at once (no common window: the first call's 16-stream cells, before each
cell prefilled its prompts in a round of its own) is left out and named in the run's notes.

    python benchmarks/engine_reads/store_runs.py --lease FOLDER --commit SHA [--lease FOLDER --commit SHA ...]
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from make_models import DRAFT_TOKENS_PER_CYCLE, configs, kv_bytes_per_token  # noqa: E402

from verifylab.intake import read_outside_bytes, read_outside_text, unpack_archive  # noqa: E402
from verifylab.iorw import atomic_write_bytes  # noqa: E402
from verifylab.model.inputs.gpus import gpu_key  # noqa: E402
from verifylab.store.manifest import Manifest, Versions  # noqa: E402
from verifylab.store.runs import RunStore  # noqa: E402

PREDICTIONS_COMMIT = "fb7da54"
ENVIRONMENT = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
SETUP = {
    "sglang_launch": "verifylab.launch.build_command for SGLang 0.5.17 (each server's command is its log's first line)",
    "weights": "random (--load-format dummy, --speculative-draft-load-format dummy)",
    "speculative": "EAGLE-3 chain: 4 draft tokens, top-k 1, SGLANG_SIMULATE_ACC_LEN=3 (match-expected)",
    "prompts": "distinct random token ids per stream (ids 3..1022), ignore_eos, temperature 0 (context); 1 (experts)",
}


def manifest(
    run_id: str,
    box: dict,
    campaign: str,
    label: str,
    parameters: dict,
    notes: list[str],
    commit: str,
    purpose: str = "issue #72: what SGLang really reads, measured on one H200 (random weights)",
) -> Manifest:
    """A run's manifest from the box's facts (box.json, written by device_run.sh when its lease began)."""
    name, capability, driver, _memory = (part.strip() for part in box["nvidia_smi"].split(","))
    return Manifest(
        run_id=run_id,
        label=label,
        purpose=purpose,
        created=datetime.fromisoformat(box["started"]),
        host="vm",
        gpu_name=name,
        compute_capability=capability,
        gpu_count=box["gpu_count"],
        interconnect="single GPU",
        driver=driver,
        cuda=box["cuda"],
        versions=Versions(
            torch=box["torch"],
            sglang=box["sglang"],
            flashinfer=box["flashinfer"],
            cuda=box["cuda"],
            verifylab=f"0.1.0+g{commit}",
        ),
        parameters=parameters,
        git_commit=commit,
        environment=ENVIRONMENT,
        campaign=campaign,
        notes=notes,
    )


def context_cells(lines: list[dict]) -> tuple[pd.DataFrame, list[str]]:
    """The measured cells as the table stores them, and the cells left out (with why)."""
    rows, left = [], []
    for r in lines:
        if "failed" in r:
            left.append(f"server {r['server']} did not start: {r['failed'][-300:]}")
            continue
        if r["window_s"] <= 0:
            left.append(
                f"{r['server']} at {r['context']} tokens x {r['streams']} streams: no window in which every "
                "stream decoded (the first streams finished before the last prefill)"
            )
            continue
        pair = configs()[r["shape"]]
        per_stream = r["tokens_in_window"] / r["streams"]
        step = r["window_s"] / per_stream * 1e3
        accept = r["accept_length"]
        rows.append(
            {
                "shape": r["shape"],
                "backend": r["backend"],
                "mode": r["mode"],
                "context": r["context"],
                "streams": r["streams"],
                "kv_bytes_per_token": kv_bytes_per_token(pair["target"]),
                "draft_kv_bytes_per_token": kv_bytes_per_token(pair["draft"]) if r["mode"] == "eagle3" else 0,
                "kv_pool_tokens": r["kv_pool_tokens"],
                "window_s": r["window_s"],
                "tokens_in_window": r["tokens_in_window"],
                "verify_tokens": DRAFT_TOKENS_PER_CYCLE if r["mode"] == "eagle3" else 1,
                "accept_length": accept,
                "step_ms": step if accept is None else None,
                "cycle_ms": None if accept is None else step * accept,
                "server_start_s": r["server_start_s"],
            }
        )
    return pd.DataFrame(rows), left


def expert_tables(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    counts = pd.read_csv(io.BytesIO(read_outside_bytes(folder / "experts.csv", "table", root=folder)))
    counts["mode"] = counts["server"].map(lambda s: "eagle3_verify" if s.endswith("eagle3") else "plain")
    counts = counts.rename(columns={"pass": "forward_pass"})[
        ["mode", "streams", "forward_pass", "layer", "tokens", "distinct_tokens", "distinct_experts"]
    ]
    chains = []
    for line in read_outside_text(folder / "expert_chains.jsonl", "record", root=folder).splitlines():
        record = json.loads(line)
        ids = record["input_ids"]
        for stream in range(len(ids) // DRAFT_TOKENS_PER_CYCLE):
            chain = ids[stream * DRAFT_TOKENS_PER_CYCLE : (stream + 1) * DRAFT_TOKENS_PER_CYCLE]
            chains.append(
                {
                    "streams": record["streams"],
                    "forward_pass": record["pass"],
                    "stream": stream,
                    "chain_ids": json.dumps(chain),
                    "distinct_ids": len(set(chain)),
                }
            )
    return counts, pd.DataFrame(chains)


def read_logs(folder: Path, servers: list[str]) -> dict[str, bytes]:
    """Each named server's log, read as a file from outside (a regular file inside the lease's folder through no
    link, within its size) before anything is stored; nothing else of the folder is read."""
    logs = {}
    for server in servers:
        source = folder / "logs" / f"{server}.log"
        if source.exists() or source.is_symlink():
            logs[source.name] = read_outside_bytes(source, "record", root=folder)
    return logs


def write_logs(target: Path, logs: dict[str, bytes]) -> None:
    for name, data in logs.items():
        atomic_write_bytes(target / "logs" / name, data)


def committed_bytes(commit: str, path: str) -> bytes:
    """``path`` as committed in ``commit`` (a prediction is the file at that commit, never the working copy)."""
    done = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{path} is not in commit {commit}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def store_lease(
    store: RunStore, folder: Path, commit: str, note: str, prediction: tuple[str, str] | None = None
) -> list[str]:
    """The lease's runs. ``prediction`` (file, commit): the prediction committed before this lease's runs, stored as
    its table and byte for byte under ``prediction/`` (default: issue #72's context prediction, as committed in
    :data:`PREDICTIONS_COMMIT`)."""
    box = json.loads(read_outside_text(folder / "box.json", "record", root=folder))
    stamp = datetime.fromisoformat(box["started"]).strftime("%Y%m%d-%H%M%S")
    gpu_name = box["nvidia_smi"].split(",")[0].strip()
    gpu = gpu_key(gpu_name)
    made = []
    lines = (
        [
            json.loads(x)
            for x in read_outside_text(folder / "context.jsonl", "record", root=folder).splitlines()
            if x.strip()
        ]
        if (folder / "context.jsonl").exists()
        else []
    )
    if lines:
        run_id = f"{stamp}-{gpu}-engine-context"
        cells, left = context_cells(lines)
        servers = sorted({f"{r['shape']}-{r['backend']}-{r['mode']}" for r in cells.to_dict("records")})
        shapes = sorted(set(cells["shape"]))
        file, at = prediction or ("benchmarks/engine_reads/predicted-context.csv", PREDICTIONS_COMMIT)
        table = "engine_growth_prediction" if file.endswith("predicted-engine.csv") else "context_prediction"
        notes = [
            note,
            f"the model's prediction ({table}) is {file} as committed in {at} before the run, stored here unchanged"
            + (" (also byte for byte under prediction/)" if prediction else ""),
            "a cell's step (plain) or cycle (EAGLE-3) time: the window from the last stream's first token to the "
            "first stream's last, divided by the tokens each stream made in it (a cycle: times the accept length "
            "SGLang reports, spec_verify_ct)",
            *[f"left out: {x}" for x in left],
        ]
        targets = {k: v for k, v in configs().items() if k in shapes}
        parameters = {**SETUP, "servers": servers, "configs": targets}
        if prediction:
            parameters["prediction"] = {"file": file, "commit": at}
        depth = ", ".join(f"{k} {v['target']['num_hidden_layers']} layers" for k, v in targets.items())
        label = f"1 x {gpu_name}, TP 1, random-weight targets ({depth}), SGLang {box['sglang']}"
        purpose = (
            f"issue #83: SGLang's verify on a deep target, measured on one {gpu_name} (random weights)"
            if prediction
            else "issue #72: what SGLang really reads, measured on one H200 (random weights)"
        )
        logs = read_logs(folder, servers)  # read (and refused) before the run is created: nothing half stored
        store.create(manifest(run_id, box, "engine-context", label, parameters, notes, commit, purpose))
        store.write_table(run_id, "context_cells", cells)
        predicted = committed_bytes(at, file)
        store.write_table(run_id, table, pd.read_csv(io.BytesIO(predicted)))
        if prediction:
            atomic_write_bytes(store.path(run_id) / "prediction" / Path(file).name, predicted)
        write_logs(store.path(run_id), logs)
        made.append(run_id)
    if (folder / "experts.csv").exists():
        run_id = f"{stamp}-{gpu}-engine-experts"
        counts, chains = expert_tables(folder)
        notes = [
            note,
            f"the model's prediction (expert_prediction) is benchmarks/engine_reads/predicted-experts.csv as "
            f"committed in {PREDICTIONS_COMMIT} before the run, stored here unchanged",
            "SGLang's expert-distribution recorder (--expert-distribution-recorder-mode per_token, CUDA graphs off): "
            "each target pass's token ids and every token's top-8 experts per layer; plain decoding passes (DECODE) "
            "and EAGLE-3 verify passes (TARGET_VERIFY) kept",
            "random weights with SGLang's dummy initialisation route by token identity (the residual stream stays "
            "the token's embedding; every layer has the same weights, so every layer routes alike): a bound on what "
            "a verify reads, not a trained router's overlap",
            "the draft's fc weight zeroed (benchmarks/engine_reads/site/sitecustomize.py) so its chains vary; they "
            "varied partly: the draft's first token was the same id in every chain (verify_chains)",
            "plain decoding at 512 streams ran as batches of 511 streams and 1: no pass held all 512",
        ]
        parameters = {**SETUP, "config": configs()["moe"]}
        label = "1 x NVIDIA H200, TP 1, random-weight MoE (Qwen3-30B-A3B-shaped, 8 layers), SGLang 0.5.17"
        logs = read_logs(folder, ["moe-triton-plain", "moe-triton-eagle3"])
        store.create(manifest(run_id, box, "engine-experts", label, parameters, notes, commit))
        store.write_table(run_id, "expert_counts", counts)
        store.write_table(run_id, "verify_chains", chains)
        store.write_table(run_id, "expert_prediction", pd.read_csv(HERE / "predicted-experts.csv"))
        write_logs(store.path(run_id), logs)
        made.append(run_id)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--lease", type=Path, action="append", required=True, help="a call's reads.tar.gz (or its unpacked folder)"
    )
    parser.add_argument("--commit", action="append", required=True, help="the commit that lease's calls ran")
    parser.add_argument("--note", action="append", required=True, help="how that lease ran (one line)")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "runs")
    parser.add_argument("--prediction", help="FILE@COMMIT: the prediction these leases' runs were made against")
    args = parser.parse_args()
    store = RunStore(args.data)
    prediction = tuple(args.prediction.rsplit("@", 1)) if args.prediction else None
    for lease, commit, note in zip(args.lease, args.commit, args.note, strict=True):
        with tempfile.TemporaryDirectory(prefix="lease-") as tmp:  # an archive is unpacked here, checked, then gone
            folder = unpack_archive(lease, Path(tmp) / "lease") if lease.is_file() else lease
            for run_id in store_lease(store, folder, commit, note, prediction):
                print(f"stored {run_id}")


if __name__ == "__main__":
    main()
