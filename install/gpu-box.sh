#!/usr/bin/env bash
# verifylab (and what rendering needs) beside a GPU box's own SGLang / torch / FlashInfer stack, which stays as it is:
# every package already installed is pinned at its installed version (a constraints file made from the environment
# itself), so an install that would change one fails instead, naming it. Then `pip check`.
#
#   bash install/gpu-box.sh [PYTHON] [VERIFYLAB_SOURCE]      # defaults: python3, this checkout
#
# PYTHON is the interpreter of the environment that runs sglang. uv is used when it is on PATH (faster), else pip.
# It refuses before it changes anything: an interpreter verifylab does not support, an environment whose packages
# cannot be listed (no pip and no uv: nothing could be pinned), or an empty list (a wrong PYTHON). After the install
# it compares the environment's packages with the list it pinned: a changed version is put back and the run fails.
set -euo pipefail
PY=${1:-python3}
SRC=${2:-$(cd "$(dirname "$0")/.." && pwd)}
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
trap 'rm -f "$stack" "$after"' EXIT
# name==version of everything installed: the stack the install may not change
freeze | grep '==' | grep -v -i '^verifylab==' > "$stack" || true
pinned=$(wc -l < "$stack")
[ "$pinned" -gt 0 ] || refuse "$PY's environment lists no installed package: is it the one that runs sglang?"
echo "pinned $pinned installed package(s) at their versions"

install -c "$stack" -e "$SRC[book]"

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
