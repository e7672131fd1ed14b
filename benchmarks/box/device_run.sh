#!/usr/bin/env bash
# `verifylab box` on one H200 (issue #40), in the calls that carry the SGLang set (live_tp2's build_transfer.sh parts):
#   bash benchmarks/box/device_run.sh probe   # carry .live/whl and .live/tp2/xfer/1: the probe alone (identity, NCCL,
#                                             # checks, policy) and the decision page from it in replay
#   bash benchmarks/box/device_run.sh stash   # carry .live/tp2/xfer/2
#   bash benchmarks/box/device_run.sh live    # carry .live/tp2/xfer/3 and .live/spec: unpack, serve the
#                                             # Qwen3-30B-A3B-shaped MoE (random weights) plainly, then the one command:
#                                             # verifylab box --gpus 1 --server URL
#   bash benchmarks/box/device_run.sh verify  # (issue #52) after speculation/device_run.sh in the same lease (the set
#                                             # unpacked in /tmp/tp2): carry .live/spec; box --plan --verify with
#                                             # verify-h200.yaml, the plan committed beforehand (plan-h200.txt)
# Runs land in /tmp/box-data (kept across calls) and come back packed in $OUT.
set -uo pipefail
source benchmarks/live_smoke/offline_set.sh
device_env
OUT=${OUT:-/tmp/box-out}
S=/tmp/tp2
D=/tmp/box-data
mkdir -p "$OUT"
stash_parts .live/tp2/xfer "$S"
[ -d "$D/runs" ] || { mkdir -p "$D" && cp -r data/reference data/runs "$D/"; }
stamp=$(date -u +%Y%m%d-%H%M%S)
case "${1:-}" in
probe)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/boxsite .live/whl/*.whl || exit 2
  export PYTHONPATH="$PWD/src/verifylab/guard/site:$PWD/src:/tmp/boxsite"
  run="$stamp-h200-probe-1gpu"
  python3 -m verifylab.cli comm probe --gpus 1 --data-dir "$D" --run-id "$run" \
    --label "1 x NVIDIA H200 (SXM), one GPU: identity, NCCL version, checks, policy" 2>&1 | tee "$OUT/probe.log"
  python3 -m verifylab.cli box --probe "$run" --decode-tok-s 266 --config .live/spec/models/target/config.json \
    --data-dir "$D" --out "$OUT/box-replay" 2>&1 | tee "$OUT/box-replay.log"
  ;;
stash) exit 0 ;;
live)
  unpack_parts "$S" || exit 2
  export PYTHONPATH="$PWD/src/verifylab/guard/site:$PWD/src:$S/site" PATH="$S/bin:$PATH"
  M=/tmp/box-models
  serve_spec_target "$M" "$OUT/server.log" 1 2 4
  python3 -m verifylab.cli box --gpus 1 --server http://127.0.0.1:30000 --config "$M/target/config.json" \
    --gpu h200 --data-dir "$D" --out "$OUT/box-live" 2>&1 | tee "$OUT/box-live.log"
  pkill -9 -f sglang.launch_server 2>/dev/null
  ;;
verify)
  unpack_parts "$S" || exit 2
  export PYTHONPATH="$PWD/src/verifylab/guard/site:$PWD/src:$S/site" PATH="$S/bin:$PATH"
  M=/tmp/box-models
  mkdir -p "$M" && cp -r .live/spec/models/. "$M/"
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  sed -e "s#@MODELS@#$M#g" -e "s#@PYTHON@#$(command -v python3)#g" \
    -e "s#@LABEL@#1 x $gpu, TP 1, Qwen3-30B-A3B-shaped MoE with random weights, experts spread#" \
    benchmarks/box/verify-h200.yaml > /tmp/verify-h200.yaml
  [ -f /tmp/verify-run-id ] || echo "$stamp-h200-box-verify" > /tmp/verify-run-id
  run=$(cat /tmp/verify-run-id)
  pkill -9 -f sglang.launch_server 2>/dev/null
  # --attention-backend triton: the backend verify-h200.yaml serves (a check refuses a file serving another than the
  # plan priced; plan-h200.args, as the stored plan of 2026-12-03 ran, names none)
  timeout "${VERIFY_TIMEOUT_S:-560}" python3 -m verifylab.cli box --plan --verify /tmp/verify-h200.yaml \
    $(cat benchmarks/box/plan-h200.args) --attention-backend triton --config "$M/target/config.json" \
    --draft-config "$M/draft/config.json" \
    --data-dir "$D" --run-id "$run" 2>&1 | tee -a "$OUT/verify.log"
  echo "box --verify exit code: ${PIPESTATUS[0]}"
  pkill -9 -f sglang.launch_server 2>/dev/null
  (cd "$D/runs" && tar -czf "$OUT/verify-run.tar.gz" "$run")
  ;;
*) echo "usage: device_run.sh probe|stash|live|verify"; exit 2 ;;
esac
(cd "$D/runs" && tar -czf "$OUT/runs.tar.gz" $(ls -d *-probe-1gpu *-box-probe* 2>/dev/null))
ls -la "$OUT" "$OUT"/box-* 2>/dev/null
