#!/usr/bin/env bash
# verifylab (and what rendering needs) beside a GPU box's own SGLang / torch / FlashInfer stack, which stays as it is:
# every package already installed is pinned at its installed version (a constraints file made from the environment
# itself), so an install that would change one fails instead, naming it. Then `pip check`.
#
#   bash install/gpu-box.sh [PYTHON] [VERIFYLAB_SOURCE]      # defaults: python3, this checkout
#
# PYTHON is the interpreter of the environment that runs sglang. uv is used when it is on PATH (faster), else pip.
set -euo pipefail
PY=${1:-python3}
SRC=${2:-$(cd "$(dirname "$0")/.." && pwd)}
stack=$(mktemp "${TMPDIR:-/tmp}/box-stack.XXXXXX")
trap 'rm -f "$stack"' EXIT
# name==version of everything installed (editable installs too): the stack the install may not change
"$PY" -m pip list --format=freeze --disable-pip-version-check | grep -v -i '^verifylab==' > "$stack" || true
echo "pinned $(wc -l < "$stack") installed package(s) at their versions"
if command -v uv > /dev/null 2>&1; then
  uv pip install --python "$PY" -c "$stack" -e "$SRC[book]"
else
  "$PY" -m pip install --disable-pip-version-check -c "$stack" -e "$SRC[book]"
fi
"$PY" -m pip check
