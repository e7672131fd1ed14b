#!/usr/bin/env bash
# Extend the measured curves that chapter 04's options model reads past 64 tokens, to 512: at C = 8 and 32
# streams x 4-8 draft tokens a verify pass carries 32-256 tokens, and beyond the largest measured size the model
# held compute and communication constant. Same scripts as the first measurements, larger --ks:
#   curves_x2.sh multi    all-reduce latency on every NCCL path + the synthetic verify pass (gpu_multi.py, 2 GPUs)
#   curves_x2.sh single   the TP-8 shard pass and add+RMSNorm (gpu_single.py, GPU 0)
# Two calls on one warm 2 x H200 lease (each fits its 10 minutes). Carry .whl: flashinfer-python 0.6.15.post1,
# apache-tvm-ffi, pydantic and its needs, and jit-cache.tgz (FlashInfer's norm + TRT-LLM comm modules for sm_90a,
# returned by an earlier call). Results come back as bundle.tgz.NN parts (cat them, then tar -xz).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
KS=${KS:-1,2,4,8,16,32,64,128,256,512}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
# -m: the cached modules are dated now, after the wheel just installed, so ninja keeps them instead of rebuilding
[ -f .whl/jit-cache.tgz ] && tar -xzmf .whl/jit-cache.tgz -C ~ && echo "JIT cache restored"
export PYTHONPATH="$PWD/src/verifylab/guard/site:/tmp/site:$PWD/src"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
python3 -c "from cuda.bindings import driver; print('cuMulticastCreate is now', driver.cuMulticastCreate.__qualname__)"
case "${1:-}" in
multi) dir=/tmp/m; timeout 540 python3 benchmarks/gpu_multi.py --out "$dir" --ks "$KS" 2>&1 | tee "$OUT/log.txt" ;;
single) dir=/tmp/s; CUDA_VISIBLE_DEVICES=0 timeout 540 python3 benchmarks/gpu_single.py --out "$dir" --ks "$KS" 2>&1 | tee "$OUT/log.txt" ;;
*) echo "usage: curves_x2.sh multi|single" >&2; exit 2 ;;
esac
echo "exit: ${PIPESTATUS[0]}"
tar -czf - -C "$(dirname "$dir")" "$(basename "$dir")" | split -b 15M -d - "$OUT/bundle.tgz."
ls -la "$OUT"
