#!/usr/bin/env bash
# On the GPU box (repository root), in consecutive device calls (the machine stays warm ~30 s; /tmp survives):
#   carry [".live/reads/xfer/1"]  bash benchmarks/engine_reads/device_run.sh stash
#   carry [".live/reads/xfer/2"]  bash benchmarks/engine_reads/device_run.sh context   # unpacks, then measures
#   carry []                      bash benchmarks/engine_reads/device_run.sh context   # resumes where it stopped
#   carry []                      bash benchmarks/engine_reads/device_run.sh experts
# Every call packs what is measured so far (results, server logs, the box's facts) into $OUT/reads.tar.gz.
set -uo pipefail
source benchmarks/live_smoke/offline_set.sh
device_env
OUT=${OUT:-/tmp/reads-out}
S=/tmp/reads
mkdir -p "$OUT" "$S"
stash_parts .live/reads/xfer "$S"
[ "${1:-}" = stash ] && exit 0
unpack_parts "$S" || exit 2
export PYTHONPATH="$PWD/src/verifylab/guard/site:$PWD/src:$S/site"
if [ ! -f "$S/box.json" ]; then
  write_box_facts "$S/box.json"
  python3 benchmarks/engine_reads/make_models.py --out "$S/models" || exit 3
fi
case "${1:-}" in
  context|experts|experts+context)
    timeout $((${LIMIT_S:-575} - SECONDS)) python3 benchmarks/engine_reads/measure.py "$1" --models "$S/models" --state "$S" \
      --deadline-s $((${LIMIT_S:-575} - 35 - SECONDS)) "${@:2}" 2>&1 | tee -a "$S/measure.log"
    ;;
  *) echo "usage: $0 stash|context|experts"; exit 2 ;;
esac
pkill -9 -f sglang.launch_server 2>/dev/null
tar -czf "$OUT/reads.tar.gz" -C "$S" box.json measure.log logs $(cd "$S" && ls context.jsonl experts.csv \
  expert_chains.jsonl 2>/dev/null)
ls -la "$OUT"
