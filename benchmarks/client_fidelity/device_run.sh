#!/usr/bin/env bash
# The benchmark client against a real SGLang 0.5.17 server on one H200 (issue #42 item 5, #43's HTTP client):
#   bash benchmarks/client_fidelity/device_run.sh stash   # carry .live/tp2/xfer/1, then again with .live/tp2/xfer/2
#   bash benchmarks/client_fidelity/device_run.sh live    # carry .live/tp2/xfer/3 and .live/spec: unpack, serve the
#                                                         # Qwen3-30B-A3B-shaped MoE (random weights), run live.py
set -uo pipefail
source benchmarks/live_smoke/offline_set.sh
device_env
OUT=${OUT:-/tmp/client-out}
S=/tmp/tp2
mkdir -p "$OUT"
stash_parts .live/tp2/xfer "$S"
case "${1:-}" in
stash) exit 0 ;;
live)
  unpack_parts "$S" || exit 2
  export PYTHONPATH="$PWD/src/verifylab/guard/site:$PWD/src:$S/site" PATH="$S/bin:$PATH"
  M=/tmp/client-models
  serve_spec_target "$M" "$OUT/server.log" 1 2 4 8 16
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
  python3 -c "import sglang, aiohttp, httpx; print(sglang.__version__, aiohttp.__version__, httpx.__version__)" \
    > "$OUT/versions.txt" 2>&1
  python3 benchmarks/client_fidelity/live.py --url http://127.0.0.1:30000 --out "$OUT" 2>&1 | tee "$OUT/live.log"
  pkill -9 -f sglang.launch_server 2>/dev/null
  ;;
*) echo "usage: device_run.sh stash|live"; exit 2 ;;
esac
