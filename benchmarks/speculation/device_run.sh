#!/usr/bin/env bash
# On the GPU box (repository root): the SGLang 0.5.17 set carried as .live/tp2/xfer/N parts (build_transfer.sh of
# live_tp2), the model configs carried in .live/spec/models; runs chapter 02's speculation grid into one run id kept
# in /tmp across calls, and packs the run and the JIT caches into $OUT. A call killed at its limit loses at most the
# cell in flight: the next call resumes the grid where it stopped.
#   bash benchmarks/speculation/device_run.sh stash     # a call that carries an early part
#   bash benchmarks/speculation/device_run.sh run       # unpack if needed, measure (resumes)
set -uo pipefail
source benchmarks/live_smoke/offline_set.sh
device_env
OUT=${OUT:-/tmp/spec-out}
S=/tmp/tp2
mkdir -p "$OUT"
stash_parts .live/tp2/xfer "$S"
[ "${1:-}" = stash ] && exit 0
if [ ! -f "$S/.unpacked" ]; then
  unpack_parts "$S" || exit 2
fi
if [ ! -f "$S/spec-started" ]; then
  mkdir -p "$S/data" && cp -r data/reference data/runs data/gates "$S/data/"
  date -u +%Y%m%d-%H%M%S > "$S/spec-started"
fi
mkdir -p "$S/spec-models" && cp -r .live/spec/models/. "$S/spec-models/"  # each call: the carried configs win
export PYTHONPATH="$PWD/src/verifylab/guard/site:$PWD/src:$S/site" PATH="$S/bin:$PATH"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
short=$(echo "$gpu" | grep -oE 'H100|H200' | head -1 | tr 'A-Z' 'a-z'); short=${short:-gpu}
RUN=$(cat "$S/spec-started")-${short}-${RUN_NAME:-spec-load}
sed -e "s#@RUN_ID@#$RUN#" -e "s#@MODELS@#$S/spec-models#g" -e "s#@PYTHON@#$(command -v python3)#g" \
  -e "s#@DATA@#$S/data#g" -e "s#@LABEL@#1 x $gpu, TP 1, Qwen3-30B-A3B-shaped MoE with random weights#" \
  "${PARAMS:-benchmarks/speculation/params.yaml}" > "$S/params-spec.yaml"
echo "run id: $RUN"
pkill -9 -f sglang.launch_server 2>/dev/null; sleep 1
timeout "${PIPELINE_TIMEOUT_S:-530}" python3 -m verifylab.cli run --params "$S/params-spec.yaml" --only 02 --no-render \
  2>&1 | tee -a "$OUT/pipeline.log"
rc=${PIPESTATUS[0]}
echo "pipeline exit code: $rc"
pkill -9 -f sglang.launch_server 2>/dev/null; pkill -9 -f ipykernel 2>/dev/null
tar -czf "$OUT/run.tar.gz" -C "$S/data/runs" "$RUN" 2>/dev/null
(cd ~ && tar -czf "$OUT/jit-cache.tar.gz" .cache/tvm-ffi .cache/sglang .triton 2>/dev/null)
ls -la "$OUT"
exit "$rc"
