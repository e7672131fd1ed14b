#!/usr/bin/env bash
# One device call on 2 x H200 (issue #26): `verifylab comm probe` in three regimes and its own cost.
#   1. the probe's cost (benchmarks/comm_probe_cost.py: reference, default sizes, about twice the sizes)
#   2. NCCL_P2P_DISABLE=1 (host memory) and NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 (socket), stored runs
#   3. FlashInfer's JIT module compiled once, then the default probe (P2P) with its kernels, stored
# NVLink multicast stays off in every process (environment + guard); FlashInfer's trtllm backend only.
# Carry .whl: flashinfer-python 0.6.15.post1, apache-tvm-ffi 0.1.11, pydantic 2.14.4 and its needs.
# Results come back as probe.tgz (runs + every process's output) and jit-cache.tgz.NN (FlashInfer's cache).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
[ -f .whl/jit-cache.tgz ] && tar -xzmf .whl/jit-cache.tgz -C ~ && echo "JIT cache restored"
export PYTHONPATH="$PWD/src/verifylab/guard/site:/tmp/site:$PWD/src"
D=/tmp/probe; mkdir -p "$D/data/runs"
STAMP=$(date -u +%Y%m%d-%H%M%S)
LABEL="2 x H200 (NVLink), SM90"
nvidia-smi --query-gpu=name,compute_cap,driver_version,pci.bus_id --format=csv,noheader
python3 -c "from cuda.bindings import driver; print('cuMulticastCreate is now', driver.cuMulticastCreate.__qualname__)"
probe() {  # probe RUN_SUFFIX LABEL_SUFFIX [extra args]
  local id="$STAMP-2xh200-probe-$1" what="$2"; shift 2
  echo "== probe $id ($what)"
  timeout 240 python3 -m verifylab.cli comm probe --data-dir "$D/data" --run-id "$id" \
    --label "$LABEL — $what; mechanism, not Blackwell" --work-dir "$D/work-$id" "$@" 2>&1
  echo "probe $id exit: $?"
}
if [ "${1:-all}" = all ]; then  # `probe_x2.sh p2p`: the last step alone (a re-run with the JIT cache carried)
  echo "== cost"; timeout 150 python3 benchmarks/comm_probe_cost.py 2>&1 | tee "$D/cost.txt"
  NCCL_P2P_DISABLE=1 probe shm "NCCL_P2P_DISABLE=1: through host memory (stand-in for a PCIe box without P2P)"
  NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 probe socket "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: NCCL's socket transport on loopback"
fi
echo "== FlashInfer JIT"; S=$(date +%s)
timeout 280 python3 -c "from flashinfer.comm.trtllm_ar import get_trtllm_comm_module as g; g()" 2>&1 | tail -3
echo "jit exit ${PIPESTATUS[0]} in $(( $(date +%s) - S )) s"
probe p2p "NCCL default: P2P over NVLink"
(cd ~ && tar -czf - .cache/flashinfer .cache/tvm-ffi 2>/dev/null | split -b 15M -d - "$OUT/jit-cache.tgz.")
tar -czf "$OUT/probe.tgz" -C /tmp probe
ls -la "$OUT"
