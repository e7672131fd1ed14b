#!/usr/bin/env bash
# On the GPU box (repository root, parts carried under .live/xfer/): unpack the SGLang and pipeline sets and
# the model once, then run `verifylab run` in live mode with params-live-smoke.yaml and pack what it made
# into $OUT (the run folder, the executed chapters, the server logs, the JIT caches for a next call: put
# that jit-cache.tar.gz into the last .live/xfer/N folder to skip the compiles).
#   bash benchmarks/live_smoke/device_run.sh stash     # a call that carries an early part: keep it in /tmp
#   bash benchmarks/live_smoke/device_run.sh           # unpack if needed, then run the pipeline
set -uo pipefail
source benchmarks/live_smoke/offline_set.sh
device_env
OUT=${OUT:-/tmp/smoke-out}
S=/tmp/smoke
mkdir -p "$OUT"

# Each call's carried folder does not survive the next call, but /tmp does while the machine stays warm.
stash_parts .live/xfer "$S"
[ "${1:-}" = stash ] && exit 0
unpack_parts "$S" || exit 2
[ "${1:-}" = unpack ] && exit 0

export PYTHONPATH="$PWD/src/verifylab/guard/site:$PWD/src:$S/site" PATH="$S/bin:$PATH"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
python3 -c "import torch, sglang, flashinfer, transformers; print('torch', torch.__version__, 'sglang', sglang.__version__, 'flashinfer', flashinfer.__version__, 'transformers', transformers.__version__)"
RUN=$(date -u +%Y%m%d-%H%M%S)-h200-live-smoke
sed -e "s#@RUN_ID@#$RUN#" -e "s#@MODEL@#$S/model/tiny-qwen3#g" -e "s#@PYTHON@#$(command -v python3)#g" \
  benchmarks/live_smoke/params-live-smoke.yaml > "$S/params.yaml"
echo "run id: $RUN"
timeout "${PIPELINE_TIMEOUT_S:-540}" python3 -m verifylab.cli run --params "$S/params.yaml" 2>&1 | tee "$OUT/pipeline.log"
rc=${PIPESTATUS[0]}
echo "pipeline exit code: $rc"
rm -rf "data/runs/$RUN/profile"/*.trace.json.gz.tmp 2>/dev/null
tar -czf "$OUT/run.tar.gz" "data/runs/$RUN" book/_generated 2>/dev/null
(cd ~ && tar -czf "$OUT/jit-cache.tar.gz" .cache/tvm-ffi .triton .cache/flashinfer 2>/dev/null)
ls -la "$OUT"
exit "$rc"
