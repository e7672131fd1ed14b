#!/usr/bin/env bash
# One device call on >= 2 GPUs (issue #14): collective latency curves and the synthetic verify pass per
# communication variant over the nvlink / shm / socket paths (benchmarks/gpu_multi.py), with NVLink multicast
# off in every process. Carry .whl (flashinfer-python 0.6.15.post1, apache-tvm-ffi, pydantic and its
# needs); results come back as bundle.tgz.NN parts (cat them, then tar -xz), the FlashInfer JIT cache too.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
[ -f .whl/jit-cache.tgz ] && tar -xzf .whl/jit-cache.tgz -C ~ && echo "JIT cache restored"
export PYTHONPATH="$PWD/src/verifylab/guard/site:/tmp/site:$PWD/src"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
nvidia-smi topo -m
python3 -c "import torch, flashinfer; print('torch', torch.__version__, 'flashinfer', flashinfer.__version__, 'gpus', torch.cuda.device_count())"
python3 -c "from cuda.bindings import driver; print('cuMulticastCreate is now', driver.cuMulticastCreate.__qualname__)"
timeout "${MEASURE_TIMEOUT_S:-520}" python3 benchmarks/gpu_multi.py --out /tmp/m "$@" 2>&1 | tee "$OUT/log.txt"
echo "gpu_multi exit: ${PIPESTATUS[0]}"
(cd ~ && tar -czf /tmp/m/jit-cache.tgz .cache/flashinfer .cache/tvm-ffi 2>/dev/null)
tar -czf - -C /tmp m | split -b 15M -d - "$OUT/bundle.tgz."
ls -la "$OUT"
