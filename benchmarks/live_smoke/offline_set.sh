# Shared by the live runs' scripts (sourced, not run): the SGLang 0.5.17 + pipeline wheel set for an offline
# CPython-3.12 GPU box, and how its tar.xz parts travel in consecutive device calls.
#   here:    collect_wheels  -> the array `wheels` (pruned where a live run never loads the parts)
#            pack_parts STAGE NAME XFER PART_MIB  -> XFER/<n>/part.NN (+ SHA256 in the last)
#   the box: device_env  /  stash_parts XFER_GLOB DEST  /  unpack_parts DEST   (DEST/.unpacked once done)
D_SET=benchmarks/live_smoke
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp)
for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
  PLAT+=(--platform "${p}_x86_64")
done

collect_wheels() {  # into .live/wheels; sets the array `wheels`
  local L=.live
  python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$L/wheels/sglang" -r "$D_SET/requirements-sglang.txt"
  python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$L/wheels/pipeline" -r "$D_SET/requirements-pipeline.txt"
  rm -rf "$L/wheels/pruned" && mkdir -p "$L/wheels/pruned"
  python3 "$D_SET/prune_wheel.py" "$L"/wheels/sglang/sglang_kernel-0.4.5-*.whl "$L/wheels/pruned" \
    'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/sm100/*' 'sgl_kernel/infllm_ops*.so' 'sgl_kernel/flashmla_ops.abi3.so'
  python3 "$D_SET/prune_wheel.py" "$L"/wheels/sglang/xgrammar-0.2.1-*.whl "$L/wheels/pruned" 'xgrammar/lib/*.a'
  wheels=("$L"/wheels/pruned/*.whl)
  local w
  for w in "$L"/wheels/sglang/*.whl; do
    [ -e "$L/wheels/pruned/$(basename "$w")" ] || wheels+=("$w")
  done
  wheels+=("$L"/wheels/pipeline/*.whl)
}

pack_parts() {  # STAGE (holds the folders to pack) NAME XFER PART_MIB; then the folders to pack
  local stage=$1 name=$2 xfer=$3 part_mib=$4 n=0 part
  shift 4
  tar -C "$stage" -cf - "$@" | xz -T0 -6 > "$stage/$name.tar.xz"
  split -b "${part_mib}M" -d "$stage/$name.tar.xz" "$stage/part."
  rm -rf "$xfer" && mkdir -p "$xfer"
  for part in "$stage"/part.*; do
    n=$((n + 1)); mkdir -p "$xfer/$n"; mv "$part" "$xfer/$n/"
  done
  (cd "$stage" && sha256sum "$name.tar.xz") > "$xfer/$n/SHA256"
  echo "carry $xfer/1 .. $xfer/$n in consecutive device calls"
}

device_env() {  # every process on the box: NVLink multicast off (the real protection), no Hub, unbuffered output
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # the box has no internet: never try the Hub
}

write_box_facts() {  # FILE: what the box is (GPU, driver, versions, SMs), once per lease
  [ -f "$1" ] && return 0
  python3 - "$1" <<'PY'
import json, subprocess, sys, datetime, torch, sglang, flashinfer, triton
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version,memory.total",
                      "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
facts = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(), "nvidia_smi": smi,
         "torch": torch.__version__, "cuda": torch.version.cuda, "sglang": sglang.__version__,
         "flashinfer": flashinfer.__version__, "triton": triton.__version__,
         "gpu_name": torch.cuda.get_device_name(0), "gpu_count": torch.cuda.device_count(),
         "sms": torch.cuda.get_device_properties(0).multi_processor_count}
json.dump(facts, open(sys.argv[1], "w"), indent=2)
print(facts)
PY
}

stash_parts() {  # XFER (carried folder) DEST: keep this call's parts in /tmp, which outlives the call
  mkdir -p "$2/parts"
  cp -f "$1"/*/part.* "$1"/*/SHA256 "$1"/*/jit-cache.tar.gz "$2/parts/" 2>/dev/null
  echo "parts stashed in $2/parts: $(ls "$2/parts" | tr '\n' ' ')"
}

unpack_parts() {  # DEST: check the parts add up, unpack them once
  local dest=$1
  [ -f "$dest/.unpacked" ] && return 0
  [ -f "$dest/parts/SHA256" ] || { echo "no SHA256 yet: carry the last xfer/N folder"; return 2; }
  if ! cat "$dest"/parts/part.* | sha256sum | grep -q "$(cut -d' ' -f1 "$dest/parts/SHA256")"; then
    echo "the parts do not add up: a part is missing (did the machine go back between calls?)"
    return 2
  fi
  cat "$dest"/parts/part.* | xz -d -T0 | tar -x -C "$dest" && touch "$dest/.unpacked" || return 2
  [ -f "$dest/parts/jit-cache.tar.gz" ] && tar -xzf "$dest/parts/jit-cache.tar.gz" -C ~ && echo "JIT caches restored"
  rm -rf "$dest/parts"
  mkdir -p "$dest/bin"
  printf '#!/bin/sh\nexec python3 -c "import sys; from jupyter_book.cli.main import main; sys.exit(main())" "$@"\n' \
    > "$dest/bin/jupyter-book"
  chmod +x "$dest/bin/jupyter-book"
  echo "unpacked into $dest: $(du -sh "$dest/site" | cut -f1) of packages"
}

serve_spec_target() {  # MODELS LOG CUDA-GRAPH-BATCH-SIZES...: the Qwen3-30B-A3B-shaped MoE of .live/spec (random
  # weights, TP 1, Triton attention) plainly on 127.0.0.1:30000; returns once /health_generate answers (or 300 s)
  local models=$1 log=$2 _
  shift 2
  mkdir -p "$models" && cp -r .live/spec/models/. "$models/"
  pkill -9 -f sglang.launch_server 2>/dev/null
  setsid python3 -m sglang.launch_server --model-path "$models/target" --tp-size 1 --port 30000 --host 127.0.0.1 \
    --load-format dummy --attention-backend triton --sampling-backend pytorch --cuda-graph-bs "$@" \
    --mem-fraction-static 0.80 --skip-server-warmup > "$log" 2>&1 &
  for _ in $(seq 1 100); do
    curl -sf http://127.0.0.1:30000/health_generate > /dev/null && return 0
    sleep 3
  done
}
