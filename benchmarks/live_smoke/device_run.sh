#!/usr/bin/env bash
# On the GPU box (repository root, parts carried under .live/xfer/): unpack the SGLang and pipeline sets and
# the model once, then run `verifylab run` in live mode with params-live-smoke.yaml and pack what it made
# into $OUT (the run folder, the executed chapters, the server logs, the JIT caches for a next call: put
# that jit-cache.tar.gz into the last .live/xfer/N folder to skip the compiles).
#   bash benchmarks/live_smoke/device_run.sh stash     # a call that carries an early part: keep it in /tmp
#   bash benchmarks/live_smoke/device_run.sh           # unpack if needed, then run the pipeline
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # the box has no internet: never try the Hub
OUT=${OUT:-/tmp/smoke-out}
S=/tmp/smoke
mkdir -p "$OUT" "$S/bin"

# Each call's carried folder does not survive the next call, but /tmp does while the machine stays warm:
# every call first stashes the parts it brought.
stash() {
  mkdir -p "$S/parts"
  cp -f .live/xfer/*/part.* .live/xfer/*/SHA256 .live/xfer/*/jit-cache.tar.gz "$S/parts/" 2>/dev/null
  echo "parts stashed in $S/parts: $(ls "$S/parts" | tr '\n' ' ')"
}

unpack() {
  [ -f "$S/.unpacked" ] && return 0
  [ -f "$S/parts/SHA256" ] || { echo "no SHA256 yet: carry the last .live/xfer/N folder"; return 2; }
  # shellcheck disable=SC2012
  if ! cat "$S"/parts/part.* | sha256sum | grep -q "$(cut -d' ' -f1 "$S/parts/SHA256")"; then
    echo "the parts do not add up to smoke.tar.xz: a part is missing (did the machine go back between calls?)"
    return 2
  fi
  cat "$S"/parts/part.* | xz -d -T0 | tar -x -C "$S" && touch "$S/.unpacked" || return 2
  # a previous call's Triton / TVM-FFI / FlashInfer JIT caches, if carried: saves the compiles
  [ -f "$S/parts/jit-cache.tar.gz" ] && tar -xzf "$S/parts/jit-cache.tar.gz" -C ~ && echo "JIT caches restored"
  rm -rf "$S/parts"
  printf '#!/bin/sh\nexec python3 -c "import sys; from jupyter_book.cli.main import main; sys.exit(main())" "$@"\n' \
    > "$S/bin/jupyter-book"
  chmod +x "$S/bin/jupyter-book"
  echo "unpacked into $S: $(du -sh "$S/site" | cut -f1) of packages"
}

stash
[ "${1:-}" = stash ] && exit 0
unpack || exit 2
[ "${1:-}" = unpack ] && exit 0

export PYTHONPATH="$PWD/src:$S/site" PATH="$S/bin:$PATH"
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
