#!/bin/bash
# Run each #77 boundary's property test against the commit before that boundary landed: a worktree at the parent
# of the commit named, today's test file copied in, missing_names.py standing in for what that commit lacks.
# Usage: tests/before_change/run.sh [TEST_FILE COMMIT]   (no arguments: every boundary below). Prints one line each.
set -u
root=$(git rev-parse --show-toplevel); py="$root/.venv/bin/python"; work=$(mktemp -d)
trap 'rm -rf "$work"; git -C "$root" worktree prune' EXIT
boundaries() {
  if [ $# -eq 2 ]; then echo "$1 $2"; return; fi
  cat <<LIST
tests/test_cache_boundary.py e934a07
tests/test_write_boundary.py dd8db2c
tests/test_secret_shapes.py d04ced9
tests/test_chapter_reads_boundary.py 5bf98bf
tests/test_archive_boundary.py 2d9e991
tests/test_wheel_boundary.py 0880d43
tests/test_public_bounds.py 6f929ce
tests/test_held_accept_boundary.py 702f532
LIST
}
boundaries "$@" | while read -r test commit; do
  tree="$work/$commit"
  git -C "$root" worktree add -q --detach "$tree" "$commit^"
  cp "$root/$test" "$tree/$test"; cp "$root/tests/before_change/missing_names.py" "$tree/tests/"
  log="$work/$(basename "$test" .py).log"
  (cd "$tree" && PYTHONPATH="$tree/src:$tree/tests" timeout 1200 "$py" -m pytest -q -p no:cacheprovider \
     -p missing_names -m "slow or not slow" "$test" > "$log" 2>&1)
  echo "$test at $commit^: $(tail -1 "$log")"
  grep -E '^(FAILED|ERROR) ' "$log" | cut -c1-160 | sed 's/^/    /'
  grep -E '^E  ' "$log" | awk '!seen[$0]++' | head -"${SHOW_ERRORS:-4}" | cut -c1-200 | sed 's/^/      /'
  git -C "$root" worktree remove --force "$tree"
done
