#!/usr/bin/env bash
# Runs each GPU test file in its own pytest process (a kernel fault poisons the CUDA context of
# its process only), then prints one line per file. Usage: bash tools/pytest_isolated.sh [pytest args]
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT/pytest"
rc=0
for f in tests/test_*.py; do
  name=$(basename "$f" .py)
  python3 -m pytest -q --tb=short -rf "$f" "$@" > "$OUT/pytest/$name.log" 2>&1 || rc=1
  printf '%-45s %s\n' "$name" "$(tail -n 1 "$OUT/pytest/$name.log")"
done
exit $rc
