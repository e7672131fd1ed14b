#!/usr/bin/env bash
# On the GPU box (repository root, parts carried under .live/tp2/xfer/): unpack the SGLang + pipeline set and
# the model configs once, then run `verifylab run` in live mode with params.yaml -- split over calls when one
# call's 10 minutes cannot hold every chapter -- and pack the run, the executed chapters and the server logs
# into $OUT. The run store lives in /tmp (kept while the machine stays warm between calls).
#   bash benchmarks/live_tp2/device_run.sh stash              # a call that carries an early part
#   bash benchmarks/live_tp2/device_run.sh run 01,02 --no-render   # unpack if needed, run those chapters
#   bash benchmarks/live_tp2/device_run.sh run 03,04,05        # the rest, then render the edition
#   bash benchmarks/live_tp2/device_run.sh pcie                # the simulated-PCIe case: skipped, gate, fused again
set -uo pipefail
source benchmarks/live_smoke/offline_set.sh
device_env
OUT=${OUT:-/tmp/tp2-out}
S=/tmp/tp2
mkdir -p "$OUT"

stash_parts .live/tp2/xfer "$S"
[ "${1:-}" = stash ] && exit 0
if [ ! -f "$S/.unpacked" ]; then
  unpack_parts "$S" || exit 2
  mkdir -p "$S/data" && cp -r data/reference data/runs data/gates "$S/data/"
  date -u +%Y%m%d-%H%M%S > "$S/started"
fi
mode=${1:-run}; shift || true  # 'run' or 'pcie'
chapters=${1:-}; shift || true

# the multicast guard first on the path: every Python process (SGLang's schedulers too) loads it
export PYTHONPATH="$PWD/src/verifylab/guard/site:$PWD/src:$S/site" PATH="$S/bin:$PATH"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
python3 -c "import torch, sglang, flashinfer; print('torch', torch.__version__, 'sglang', sglang.__version__, 'flashinfer', flashinfer.__version__)"
python3 -c "import torch, deep_gemm; print('deep_gemm imports (EAGLE-3 draft graphs need it)')" 2>&1 | tail -1
if [ "$mode" = pcie ]; then
  # before: fusion requested, the preflight sees no multicast -> skipped; then the precondition gate, after: fused
  pkill -9 -f sglang.launch_server 2>/dev/null
  fusion_py="$S/site/sglang/srt/layers/flashinfer_comm_fusion.py"
  before_sha=$(sha256sum "$fusion_py" | cut -d' ' -f1); before_mode=$(stat -c %a "$fusion_py")
  for phase in before after; do
    RUN=$(date -u +%Y%m%d-%H%M%S)-2xh200-pcie-sim-$phase
    sed -e "s#@RUN_ID@#$RUN#" -e "s#campaign: pcie-sim-before#campaign: pcie-sim-$phase#" -e "s#@MODELS@#$S/models#g" \
      -e "s#@PYTHON@#$(command -v python3)#g" -e "s#@DATA@#$S/data#g" benchmarks/live_tp2/params-pcie-sim.yaml > "$S/params-pcie.yaml"
    [ "$phase" = after ] && python3 -m verifylab.cli gates apply --arch sm90 --root "$S/site" \
      && python3 -m verifylab.cli gates verify --arch sm90 --root "$S/site"
    # chapter 03 alone: it reads the fusion state from SGLang's log and counts the kernels of the target passes
    timeout 240 python3 -m verifylab.cli run --params "$S/params-pcie.yaml" --only 03 --no-render 2>&1 \
      | tee -a "$OUT/pipeline.log"
    pkill -9 -f sglang.launch_server 2>/dev/null
    tar -czf "$OUT/run-pcie-$phase.tar.gz" -C "$S/data/runs" "$RUN" 2>/dev/null
  done
  python3 -m verifylab.cli gates revert --root "$S/site"
  [ "$(sha256sum "$fusion_py" | cut -d' ' -f1)" = "$before_sha" ] && [ "$(stat -c %a "$fusion_py")" = "$before_mode" ] \
    && echo "revert: flashinfer_comm_fusion.py restored byte for byte, mode $before_mode" \
    || echo "revert: flashinfer_comm_fusion.py DIFFERS from before"
  ls -la "$OUT"
  exit 0
fi
# PARAMS / RUN_NAME: another parameter file and run name (params-eagle3.yaml: the EAGLE-3 variants on their own)
RUN=$(cat "$S/started")-2xh200-${RUN_NAME:-live-tp2}
sed -e "s#@RUN_ID@#$RUN#" -e "s#@MODELS@#$S/models#g" -e "s#@PYTHON@#$(command -v python3)#g" -e "s#@DATA@#$S/data#g" \
  "${PARAMS:-benchmarks/live_tp2/params.yaml}" > "$S/params.yaml"
echo "run id: $RUN; chapters: ${chapters:-all}"
pkill -9 -f sglang.launch_server 2>/dev/null; sleep 1  # a server left by a stopped call holds the GPUs and ports
timeout "${PIPELINE_TIMEOUT_S:-540}" python3 -m verifylab.cli run --params "$S/params.yaml" ${chapters:+--only "$chapters"} "$@" \
  2>&1 | tee -a "$OUT/pipeline.log"
rc=${PIPESTATUS[0]}
echo "pipeline exit code: $rc"
pkill -9 -f sglang.launch_server 2>/dev/null  # servers live in their own sessions: never leave one behind
rm -rf "$S/data/runs/$RUN/profile"/*/*.tmp 2>/dev/null
tar -czf "$OUT/run.tar.gz" -C "$S/data/runs" "$RUN" 2>/dev/null
tar -czf "$OUT/chapters.tar.gz" book/_generated 2>/dev/null
(cd ~ && tar -czf "$OUT/jit-cache.tar.gz" .cache/tvm-ffi .cache/sglang .triton 2>/dev/null)
ls -la "$OUT"
exit "$rc"
