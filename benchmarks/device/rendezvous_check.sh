#!/usr/bin/env bash
# One device call on one GPU: the ranks' FileStore rendezvous (verifylab.rendezvous) on NCCL with a real device, where
# CI has only gloo on CPUs. A mechanics check, not evidence: nothing is stored in data/.
#   1. `comm probe`'s ranks (one GPU: NCCL, device_id, the store in the probe's work folder)
#   2. synth-verify's rank on NCCL (norm in PyTorch: no FlashInfer here), then its ranks on gloo (two processes)
#   3. a rank whose peer never comes: the store's timeout, named as an initialisation that did not complete
# NVLink multicast stays off in every process (environment + guard). Carry .whl: pydantic 2.14.4 and its needs.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="$PWD/src/verifylab/guard/site:/tmp/site:$PWD/src"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
python3 - <<'PY' 2>&1 | tee "$OUT/rendezvous.log"
import tempfile, time
from pathlib import Path

import torch

from verifylab.comm.config import ProbeConfig
from verifylab.comm.probe import run_probe
from verifylab.errors import CommProbeError
from verifylab.synth.runner import SynthConfig, run_synth_verify

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
began = time.monotonic()
try:  # rank 1 of 2 is never started: rank 0 waits on the store for the timeout
    import datetime
    import torch.distributed as dist
    from verifylab.rendezvous import fresh_rendezvous, rendezvous_store
    store = rendezvous_store(fresh_rendezvous(work, "alone"), 2, datetime.timedelta(seconds=5))
    dist.init_process_group("nccl", store=store, rank=0, world_size=2, timeout=datetime.timedelta(seconds=5),
                            device_id=torch.device("cuda", 0))
    print("a lone rank initialised: unexpected")
except Exception as exc:
    from verifylab.comm.probe import STORE_TIMEOUT
    print(f"a lone rank: {type(exc).__name__}: {str(exc)[:120]!r} after {time.monotonic() - began:.1f} s; "
          f"named a rendezvous timeout: {bool(STORE_TIMEOUT.search(str(exc)))}")
PY
