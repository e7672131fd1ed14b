#!/usr/bin/env bash
# One device call on one GPU: the ranks' FileStore rendezvous (verifylab.rendezvous) on NCCL with a real device, where
# CI has only gloo on CPUs. A mechanics check, not evidence: nothing is stored in data/.
#   1. `comm probe`'s ranks (one GPU: NCCL, device_id, the store in the probe's work folder)
#   2. synth-verify's rank on NCCL (norm in PyTorch: no FlashInfer here), then its ranks on gloo (two processes)
#   3. a rank 0 whose peer never comes (NCCL): how it ends, bounded at 60 s
# Seen on 1 x H100 80GB (torch 2.11.0+cu130, NCCL 2.28.9), 2026-12-06: 1 and 2 passed; 3 (then unbounded) was still
# waiting about 250 s later, far past its 5 s store timeout (rank 0 waits for its peer outside the store, presumably
# in NCCL's bootstrap): the probe's and synth-verify's own deadlines end such a rank.
# NVLink multicast stays off in every process (environment + guard). Carry .whl: pydantic 2.14.4 and its needs.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="$PWD/src/verifylab/guard/site:/tmp/site:$PWD/src"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
cat > /tmp/rendezvous_check.py <<'PY'  # a file, not stdin: forkserver's ranks import the main module again
import tempfile, time
from pathlib import Path

import torch

from verifylab.comm.config import ProbeConfig
from verifylab.comm.probe import run_probe
from verifylab.errors import CommProbeError
from verifylab.synth.runner import SynthConfig, run_synth_verify


def main() -> None:
    print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), torch.cuda.get_device_name(0))
    work = Path(tempfile.mkdtemp())
    began = time.monotonic()
    raw = run_probe(ProbeConfig(backend="nccl", tokens=[1, 4], subgroup_tokens=[4], replays=3, calls=2,
                                extra_impls=False, peer_copies=False), work / "probe")
    print(f"probe (nccl, {raw.world} rank): ranks {[r['rank'] for r in raw.ranks]}, {time.monotonic() - began:.1f} s")
    for backend, ranks in (("nccl", 1), ("gloo", 2)):
        began = time.monotonic()
        out = run_synth_verify(SynthConfig(backend=backend, ranks=ranks, layers=2, steps=2, norm="pytorch",
                                           cuda_graph=False, profile_dir=work / f"synth-{backend}"))
        print(f"synth-verify ({backend}, {ranks} rank(s)): median step {out['median_step_ms']:.3f} ms, "
              f"{time.monotonic() - began:.1f} s; left in its folder: {sorted(p.name for p in (work / f'synth-{backend}').glob('.rank*'))}")
    began = time.monotonic()  # rank 1 of 2 is never started: how rank 0 ends, in a child bounded at 60 s
    import subprocess, sys
    lone = (
        "import datetime, torch, torch.distributed as dist\n"
        "from verifylab.rendezvous import fresh_rendezvous, rendezvous_store\n"
        f"store = rendezvous_store(fresh_rendezvous({str(work)!r}, 'alone'), 2, datetime.timedelta(seconds=5))\n"
        "dist.init_process_group('nccl', store=store, rank=0, world_size=2, timeout=datetime.timedelta(seconds=5),"
        " device_id=torch.device('cuda', 0))\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", lone], capture_output=True, text=True, timeout=60)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"a lone rank 0 (nccl): exit {done.returncode} after {time.monotonic() - began:.1f} s: {last[:160]}")
    except subprocess.TimeoutExpired:
        print("a lone rank 0 (nccl): still waiting after 60 s, past its 5 s store timeout")


if __name__ == "__main__":  # forkserver's ranks import this file again
    main()
PY
python3 /tmp/rendezvous_check.py 2>&1 | tee "$OUT/rendezvous.log"
