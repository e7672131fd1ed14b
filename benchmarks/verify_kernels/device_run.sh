#!/usr/bin/env bash
# On the GPU box (repository root), in consecutive device calls (the machine stays warm ~30 s; /tmp survives):
#   carry [".live/reads/xfer/1"]  bash benchmarks/verify_kernels/device_run.sh stash
#   carry [".live/reads/xfer/2"]  bash benchmarks/verify_kernels/device_run.sh measure [measure.py options]
#   carry []                      bash benchmarks/verify_kernels/device_run.sh measure   # resumes where it stopped
# The SGLang 0.5.17 set of benchmarks/engine_reads/build_transfer.sh. Every call copies what is measured so far (the
# cells, the log, the box's facts) into $OUT.
set -uo pipefail
source benchmarks/live_smoke/offline_set.sh
device_env
OUT=${OUT:-/tmp/vk-out}
S=/tmp/reads
mkdir -p "$OUT" "$S/vk"
stash_parts .live/reads/xfer "$S"
[ "${1:-}" = stash ] && exit 0
unpack_parts "$S" || exit 2
export PYTHONPATH="$PWD/src/verifylab/guard/site:$PWD/src:$S/site"
write_box_facts "$S/vk/box.json"
case "${1:-}" in
  measure)
    timeout $((${LIMIT_S:-570} - SECONDS)) python3 benchmarks/verify_kernels/measure.py --out "$S/vk/cells.jsonl" \
      --deadline-s $((${LIMIT_S:-570} - 60 - SECONDS)) "${@:2}" 2>&1 | tee -a "$S/vk/measure.log"
    ;;
  *) echo "usage: $0 stash|measure"; exit 2 ;;
esac
cp "$S/vk/box.json" "$S/vk/measure.log" "$OUT/" 2>/dev/null
cp "$S/vk/cells.jsonl" "$OUT/" 2>/dev/null
ls -la "$OUT"
