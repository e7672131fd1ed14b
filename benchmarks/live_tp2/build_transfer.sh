#!/usr/bin/env bash
# Build, on a machine with the package registries, everything the live TP-2 run carries to the GPU box (no
# internet there, at most 64 MiB a call): the model configs, the SGLang 0.5.17 set and the pipeline set
# (benchmarks/live_smoke's requirement files and pruning), installed for CPython 3.12 with pip --target, plus
# FlashInfer's prebuilt norm and TRT-LLM comm modules for sm_90a when JIT_SO_DIR names a folder holding them
# (FlashInfer loads <site>/flashinfer/data/aot/<name>/<name>.so without compiling). Packed as tar.xz and
# cut into parts of at most PART_MIB: .live/tp2/xfer/<n>/, one folder per device call (README.md).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
L=.live S=.live/tp2 D=benchmarks/live_smoke PART_MIB=${PART_MIB:-56}
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp)
for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
  PLAT+=(--platform "${p}_x86_64")
done
grep -qx "/.live/" .git/info/exclude || echo "/.live/" >> .git/info/exclude
mkdir -p "$S"

echo "== models: configs + tokenizer (weights are dummy on the box)"
if [ ! -x "$L/venv/bin/python" ]; then
  python3 -m venv "$L/venv" && "$L/venv/bin/pip" install -q tokenizers transformers==5.12.1 pyyaml
fi
"$L/venv/bin/python" benchmarks/live_tp2/make_models.py --out "$S/models" >/dev/null

echo "== wheels (CPython 3.12, x86-64)"
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$L/wheels/sglang" -r "$D/requirements-sglang.txt"
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$L/wheels/pipeline" -r "$D/requirements-pipeline.txt"
rm -rf "$L/wheels/pruned" && mkdir -p "$L/wheels/pruned"
python3 "$D/prune_wheel.py" "$L"/wheels/sglang/sglang_kernel-0.4.5-*.whl "$L/wheels/pruned" \
  'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/sm100/*' 'sgl_kernel/infllm_ops*.so' 'sgl_kernel/flashmla_ops.abi3.so'
python3 "$D/prune_wheel.py" "$L"/wheels/sglang/xgrammar-0.2.1-*.whl "$L/wheels/pruned" 'xgrammar/lib/*.a'
wheels=("$L"/wheels/pruned/*.whl)
for w in "$L"/wheels/sglang/*.whl; do
  [ -e "$L/wheels/pruned/$(basename "$w")" ] || wheels+=("$w")
done

echo "== installing for the GPU box's Python (pip --target) and packing"
rm -rf "$S/stage" "$S/xfer" && mkdir -p "$S/stage" "$S/xfer"
python3 -m pip install -q --no-deps --no-compile "${PLAT[@]}" --target "$S/stage/site" "${wheels[@]}" "$L"/wheels/pipeline/*.whl
if [ -n "${JIT_SO_DIR:-}" ]; then
  for name in norm trtllm_comm; do
    mkdir -p "$S/stage/site/flashinfer/data/aot/$name"
    cp "$JIT_SO_DIR/$name/$name.so" "$S/stage/site/flashinfer/data/aot/$name/"
  done
  echo "FlashInfer AOT modules: norm, trtllm_comm (built on the box by benchmarks/device/comm_x2.sh)"
fi
cp -r "$S/models" "$S/stage/models"
tar -C "$S/stage" -cf - site models | xz -T0 -6 > "$S/stage/tp2.tar.xz"
split -b "${PART_MIB}M" -d "$S/stage/tp2.tar.xz" "$S/stage/part."
n=0
for part in "$S"/stage/part.*; do
  n=$((n + 1)); mkdir -p "$S/xfer/$n"; mv "$part" "$S/xfer/$n/"
done
(cd "$S/stage" && sha256sum tp2.tar.xz) > "$S/xfer/$n/SHA256"
du -sh "$S"/stage/site "$S"/stage/tp2.tar.xz "$S"/xfer/*
echo "carry .live/tp2/xfer/1 .. .live/tp2/xfer/$n in consecutive device calls (README.md)"
