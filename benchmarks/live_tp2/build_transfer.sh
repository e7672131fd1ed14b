#!/usr/bin/env bash
# Build, on a machine with the package registries, everything the live TP-2 run carries to the GPU box (no
# internet there, at most 64 MiB a call): the model configs, the SGLang 0.5.17 set and the pipeline set
# (benchmarks/live_smoke/offline_set.sh), installed for CPython 3.12 with pip --target, plus FlashInfer's
# prebuilt norm and TRT-LLM comm modules for sm_90a when JIT_SO_DIR names a folder holding them (FlashInfer
# loads <site>/flashinfer/data/aot/<name>/<name>.so without compiling). Packed as tar.xz and cut into parts
# of at most PART_MIB: .live/tp2/xfer/<n>/, one folder per device call (README.md).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source benchmarks/live_smoke/offline_set.sh
L=.live S=.live/tp2 PART_MIB=${PART_MIB:-56}
grep -qx "/.live/" .git/info/exclude || echo "/.live/" >> .git/info/exclude
mkdir -p "$S"

echo "== models: configs + tokenizer (weights are dummy on the box)"
if [ ! -x "$L/venv/bin/python" ]; then
  python3 -m venv "$L/venv" && "$L/venv/bin/pip" install -q tokenizers transformers==5.12.1 pyyaml
fi
"$L/venv/bin/python" benchmarks/live_tp2/make_models.py --out "$S/models" >/dev/null

echo "== wheels (CPython 3.12, x86-64)"
collect_wheels

echo "== installing for the GPU box's Python (pip --target) and packing"
rm -rf "$S/stage" && mkdir -p "$S/stage"
python3 -m pip install -q --no-deps --no-compile "${PLAT[@]}" --target "$S/stage/site" "${wheels[@]}"
if [ -n "${JIT_SO_DIR:-}" ]; then
  for name in norm trtllm_comm; do
    mkdir -p "$S/stage/site/flashinfer/data/aot/$name"
    cp "$JIT_SO_DIR/$name/$name.so" "$S/stage/site/flashinfer/data/aot/$name/"
  done
  echo "FlashInfer AOT modules: norm, trtllm_comm (built on the box by benchmarks/device/comm_x2.sh)"
fi
cp -r "$S/models" "$S/stage/models"
pack_parts "$S/stage" tp2 "$S/xfer" "$PART_MIB" site models
du -sh "$S"/stage/site "$S"/stage/tp2.tar.xz "$S"/xfer/*
