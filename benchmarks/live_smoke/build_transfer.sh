#!/usr/bin/env bash
# Build, on a machine with the package registries, everything the live smoke carries to the GPU box
# (which has no internet and takes at most 64 MiB a call): the tiny model, the SGLang 0.5.17 set and the
# verifylab-pipeline set, each installed for CPython 3.12 with pip --target, packed as tar.xz and cut into
# parts of at most PART_MIB. Output: .live/xfer/<n>/ (one folder per device call, see README.md).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
L=.live D=benchmarks/live_smoke PART_MIB=${PART_MIB:-58}
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp)
for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
  PLAT+=(--platform "${p}_x86_64")
done
grep -qx "/.live/" .git/info/exclude || echo "/.live/" >> .git/info/exclude
mkdir -p "$L"

echo "== model: a tiny random-weight Qwen3 and its tokenizer"
if [ ! -x "$L/venv/bin/python" ]; then
  python3 -m venv "$L/venv"
  "$L/venv/bin/pip" install -q torch transformers==5.12.1 tokenizers pyyaml
fi
"$L/venv/bin/python" "$D/make_tiny_model.py" --out "$L/model/tiny-qwen3" >/dev/null

echo "== wheels (CPython 3.12, x86-64)"
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$L/wheels/sglang" -r "$D/requirements-sglang.txt"
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$L/wheels/pipeline" -r "$D/requirements-pipeline.txt"
echo "== pruning what a TP-1, Triton-attention run on SM90 never loads"
rm -rf "$L/wheels/pruned" && mkdir -p "$L/wheels/pruned"
python3 "$D/prune_wheel.py" "$L"/wheels/sglang/sglang_kernel-0.4.5-*.whl "$L/wheels/pruned" \
  'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/sm100/*' 'sgl_kernel/infllm_ops*.so' 'sgl_kernel/flashmla_ops.abi3.so'
python3 "$D/prune_wheel.py" "$L"/wheels/sglang/xgrammar-0.2.1-*.whl "$L/wheels/pruned" 'xgrammar/lib/*.a'
wheels=("$L"/wheels/pruned/*.whl)
for w in "$L"/wheels/sglang/*.whl; do
  [ -e "$L/wheels/pruned/$(basename "$w")" ] || wheels+=("$w")
done

echo "== installing for the GPU box's Python (pip --target) and packing"
rm -rf "$L/stage" "$L/xfer" && mkdir -p "$L/stage" "$L/xfer"
python3 -m pip install -q --no-deps --no-compile "${PLAT[@]}" --target "$L/stage/site" "${wheels[@]}" "$L"/wheels/pipeline/*.whl
cp -r "$L/model" "$L/stage/model"
tar -C "$L/stage" -cf - site model | xz -T0 -6 > "$L/stage/smoke.tar.xz"
split -b "${PART_MIB}M" -d "$L/stage/smoke.tar.xz" "$L/stage/part."
n=0
for part in "$L"/stage/part.*; do
  n=$((n + 1)); mkdir -p "$L/xfer/$n"; mv "$part" "$L/xfer/$n/"
done
(cd "$L/stage" && sha256sum smoke.tar.xz) > "$L/xfer/$n/SHA256"
du -sh "$L"/stage/site "$L"/stage/smoke.tar.xz "$L"/xfer/*
echo "carry .live/xfer/1 .. .live/xfer/$n in consecutive device calls (README.md)"
