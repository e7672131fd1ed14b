#!/usr/bin/env bash
# One device call: FlashInfer SM120 build check (background, CPU-bound) + gpu_multi.py on the GPUs present.
# Carry .whl (flashinfer 0.6.4 + tvm-ffi + cudnn-frontend + pydantic) and .whl17 (flashinfer 0.6.17).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/b" "$OUT/m" /tmp/fw /tmp/m
cp .whl/flashinfer_python-*.whl .whl17/flashinfer_python-*.whl /tmp/fw/
python3 benchmarks/sm120_build_check.py --wheels /tmp/fw --deps /tmp/site --out /tmp/b > "$OUT/b/log.txt" 2>&1 &
build=$!
ranks=$(nvidia-smi -L | wc -l)
python3 benchmarks/gpu_multi.py --out /tmp/m --ranks "$ranks" --ks 1,4,16,64,512 --replays 10 --synth > "$OUT/m/log.txt" 2>&1
for d in /tmp/m/synth_*; do python3 -m verifylab.cli trace summarize "$d" --json > "$d.summary.json"; done
cp /tmp/m/allreduce_*.json /tmp/m/topology.txt "$OUT/m/" 2>/dev/null
tar czf "$OUT/m/synth.tgz" -C /tmp/m $(cd /tmp/m && ls -d synth_*)
wait $build
cp /tmp/b/sm120_build.json "$OUT/b/" 2>/dev/null
tar czf "$OUT/b/build_logs.tgz" -C /tmp/b $(cd /tmp/b && ls build-*.log)
tail -8 "$OUT/m/log.txt"; tail -6 "$OUT/b/log.txt"
