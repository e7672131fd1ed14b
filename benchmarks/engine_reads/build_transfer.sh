#!/usr/bin/env bash
# Build, on a machine with the package registries, what the engine-reads runs carry to the GPU box (no internet
# there, at most 64 MiB a call with the ~14 MB working tree): the SGLang 0.5.17 set of benchmarks/live_smoke
# (sglang-kernel and xgrammar pruned), installed for CPython 3.12 with pip --target, packed as tar.xz and cut into
# parts of PART_MIB: .live/reads/xfer/<n>/, one folder per device call. The model configs are written on the box.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source benchmarks/live_smoke/offline_set.sh
L=.live S=.live/reads PART_MIB=${PART_MIB:-48}
grep -qx "/.live/" .git/info/exclude 2>/dev/null || echo "/.live/" >> .git/info/exclude
mkdir -p "$S"
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$L/wheels/sglang" -r "$D_SET/requirements-sglang.txt"
rm -rf "$L/wheels/pruned" && mkdir -p "$L/wheels/pruned"
python3 "$D_SET/prune_wheel.py" "$L"/wheels/sglang/sglang_kernel-0.4.5-*.whl "$L/wheels/pruned" \
  'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/sm100/*' 'sgl_kernel/infllm_ops*.so' 'sgl_kernel/flashmla_ops.abi3.so'
python3 "$D_SET/prune_wheel.py" "$L"/wheels/sglang/xgrammar-0.2.1-*.whl "$L/wheels/pruned" 'xgrammar/lib/*.a'
wheels=("$L"/wheels/pruned/*.whl)
for w in "$L"/wheels/sglang/*.whl; do
  [ -e "$L/wheels/pruned/$(basename "$w")" ] || wheels+=("$w")
done
rm -rf "$S/stage" && mkdir -p "$S/stage"
python3 -m pip install -q --no-deps --no-compile "${PLAT[@]}" --target "$S/stage/site" "${wheels[@]}"
pack_parts "$S/stage" reads "$S/xfer" "$PART_MIB" site
du -sh "$S"/stage/site "$S"/stage/reads.tar.xz "$S"/xfer/*
