#!/usr/bin/env bash
# verifylab (and what rendering needs) beside a GPU box's own SGLang / torch / FlashInfer stack, which stays as it is:
# every package already installed is pinned at its installed version (a constraints file made from the environment
# itself), so an install that would change one fails instead, naming it. Then `pip check`.
#
#   bash install/gpu-box.sh [--box-only] PYTHON [VERIFYLAB_SOURCE]      # VERIFYLAB_SOURCE: this checkout
#
# PYTHON is required: on a shared machine the first python3 on PATH is rarely the one that runs sglang.
#
# --box-only installs what `verifylab box` (and probe, bench, serve) needs, without the book's rendering stack
# (Jupyter Book, papermill, Altair): for a box whose pins the rendering stack cannot live beside; render the book on
# any other machine (make book). When the box's pins and verifylab's requirements cannot meet, the run ends with one
# line naming both sides.
#
# PYTHON is the interpreter of the environment that runs sglang. uv is used when it is on PATH (faster), else pip.
# It refuses before it changes anything: an interpreter verifylab does not support, an environment whose packages
# cannot be listed (no pip and no uv: nothing could be pinned), or an empty list (a wrong PYTHON). After the install
# it compares the environment's packages with the list it pinned: a changed version is put back and the run fails.
set -euo pipefail
usage() {
  cat << 'EOF_USAGE'
usage: bash install/gpu-box.sh [--box-only] PYTHON [VERIFYLAB_SOURCE]

Install verifylab beside a GPU box's own SGLang / torch / FlashInfer, pinning every installed package at its
version (an install that would change one fails, naming it), then `pip check`.

  PYTHON            the interpreter of the environment that runs sglang (required), e.g. /opt/sglang/bin/python
  VERIFYLAB_SOURCE  the verifylab checkout to install (default: the one this script is in)
  --box-only        only what `verifylab box`, the probe and the benchmarks need (no book rendering stack)
  -h, --help        this text; nothing is changed

Example: bash install/gpu-box.sh "$(command -v python)"   # run inside the activated sglang environment
EOF_USAGE
}
TARGET_EXTRA="[book]"
positional=()
for arg in "$@"; do  # options anywhere on the line: a trailing --box-only counts, -h never installs
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    --box-only) TARGET_EXTRA="" ;;
    -*) usage >&2; echo "gpu-box.sh: unknown option $arg; nothing was changed" >&2; exit 2 ;;
    *) positional+=("$arg") ;;
  esac
done
case ${#positional[@]} in
  0) usage >&2; echo "gpu-box.sh: PYTHON is required (the interpreter that runs sglang); nothing was changed" >&2; exit 2 ;;
  1 | 2) ;;
  *) usage >&2; echo "gpu-box.sh: at most PYTHON and VERIFYLAB_SOURCE, got ${#positional[@]} arguments; nothing was changed" >&2; exit 2 ;;
esac
PY=${positional[0]}
SRC=${positional[1]:-$(cd "$(dirname "$0")/.." && pwd)}
MIN_PYTHON="3.11"  # pyproject.toml's requires-python

refuse() { echo "gpu-box.sh: $*; nothing was changed" >&2; exit 2; }

command -v "$PY" > /dev/null 2>&1 || [ -x "$PY" ] || refuse "no interpreter $PY"
version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2> /dev/null) || refuse "$PY does not run"
"$PY" -c "import sys; sys.exit(sys.version_info[:2] < tuple(map(int, '$MIN_PYTHON'.split('.'))))" \
  || refuse "$PY is Python $version; verifylab needs $MIN_PYTHON or newer (use the environment that runs sglang)"

if command -v uv > /dev/null 2>&1; then
  freeze() { uv pip freeze --python "$PY"; }
  install() { uv pip install --python "$PY" "$@"; }
elif "$PY" -m pip --version > /dev/null 2>&1; then
  freeze() { "$PY" -m pip list --format=freeze --disable-pip-version-check; }
  install() { "$PY" -m pip install --disable-pip-version-check "$@"; }
else
  refuse "$PY's environment has no pip and uv is not on PATH, so its packages cannot be listed and pinned"
fi

stack=$(mktemp "${TMPDIR:-/tmp}/box-stack.XXXXXX")
after=$(mktemp "${TMPDIR:-/tmp}/box-after.XXXXXX")
log=$(mktemp "${TMPDIR:-/tmp}/box-install.XXXXXX")
trap 'rm -f "$stack" "$after" "$log"' EXIT

# The resolver could not meet the box's pins: the one requirement that met a pin, both sides named in one line.
explain_conflict() {
  local line name pinned wanted
  while IFS= read -r line; do
    name=${line%%==*}
    pinned=${line#*==}
    wanted=$(grep -o -i -E "(^|[^a-z0-9_.-])${name}[ ]*(>=|<=|~=|!=|==|<|>)[ ]*[0-9][0-9a-z.*+-]*" "$log" \
      | sed -E 's/^[^a-zA-Z0-9]//' | grep -v -i -E "==[ ]*${pinned//./\\.}$" | head -n 1 || true)
    if [ -n "$wanted" ]; then
      if [ -n "$TARGET_EXTRA" ]; then
        next="install only what verifylab box needs: bash install/gpu-box.sh --box-only $PY (make book renders elsewhere)"
      else
        next="install verifylab in an environment of its own"
      fi
      echo "gpu-box.sh: verifylab$TARGET_EXTRA needs ${wanted// /} but this box pins $name==$pinned;" \
        "nothing was changed; $next" >&2
      return
    fi
  done < "$stack"
  echo "gpu-box.sh: the install could not meet the box's pins (the resolver's words above); nothing was changed" >&2
}
# name==version of everything installed: the stack the install may not change
freeze | grep '==' | grep -v -i '^verifylab==' > "$stack" || true
pinned=$(wc -l < "$stack")
[ "$pinned" -gt 0 ] || refuse "$PY's environment lists no installed package: is it the one that runs sglang?"
echo "pinned $pinned installed package(s) at their versions"

if ! install -c "$stack" -e "$SRC$TARGET_EXTRA" > "$log" 2>&1; then
  sed 's/^/  /' "$log" >&2
  explain_conflict
  exit 1
fi
cat "$log"

# what the install changed of the stack (a tool that ignored a pin): put it back, then fail
freeze | grep '==' > "$after" || true
changed=$(grep -v -x -F -f "$after" "$stack" | grep -v -i '^verifylab==' || true)
if [ -n "$changed" ]; then
  echo "gpu-box.sh: the install changed $(echo "$changed" | wc -l) package(s) of the box; putting them back:" >&2
  echo "$changed" >&2
  # shellcheck disable=SC2086
  install --no-deps $changed >&2
  exit 1
fi
if "$PY" -m pip --version > /dev/null 2>&1; then "$PY" -m pip check; else uv pip check --python "$PY"; fi
