#!/usr/bin/env bash
# Build, on a machine with the package registries, everything the live smoke carries to the GPU box
# (which has no internet and takes at most 64 MiB a call): the tiny model, the SGLang 0.5.17 set and the
# verifylab-pipeline set, each installed for CPython 3.12 with pip --target, packed as tar.xz and cut into
# parts of at most PART_MIB. Output: .live/xfer/<n>/ (one folder per device call, see README.md).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source benchmarks/live_smoke/offline_set.sh
L=.live D=benchmarks/live_smoke PART_MIB=${PART_MIB:-58}
grep -qx "/.live/" .git/info/exclude || echo "/.live/" >> .git/info/exclude
mkdir -p "$L"

echo "== model: a tiny random-weight Qwen3 and its tokenizer"
if [ ! -x "$L/venv/bin/python" ]; then
  python3 -m venv "$L/venv"
  "$L/venv/bin/pip" install -q torch==2.13.0 transformers==5.12.1 tokenizers pyyaml
fi
"$L/venv/bin/python" "$D/make_tiny_model.py" --out "$L/model/tiny-qwen3" >/dev/null

echo "== wheels (CPython 3.12, x86-64), pruned of what a TP-1, Triton-attention run on SM90 never loads"
collect_wheels

echo "== installing for the GPU box's Python (pip --target) and packing"
rm -rf "$L/stage" && mkdir -p "$L/stage"
python3 -m pip install -q --no-deps --no-compile "${PLAT[@]}" --target "$L/stage/site" "${wheels[@]}"
cp -r "$L/model" "$L/stage/model"
pack_parts "$L/stage" smoke "$L/xfer" "$PART_MIB" site model
du -sh "$L"/stage/site "$L"/stage/smoke.tar.xz "$L"/xfer/*
