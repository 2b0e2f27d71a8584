#!/usr/bin/env bash
# A whole device session step in one call (tools/gpu_check.sh, then extra commands), with a
# compact report last and every log packed into $OUT/results.tgz (the device tool returns at
# most 8 files). Usage on the device machine:
#   bash tools/device_run.sh [extra shell command ...]
# Knobs as tools/gpu_check.sh (SKIP_BUILD, SKIP_TESTS, SKIP_BENCH, BENCHES, BENCH_ARGS, PYTEST_ARGS).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DEST="${OUT:-/tmp/out}"
WORK=/tmp/device_run
rm -rf "$WORK" && mkdir -p "$WORK"
OUT="$WORK" bash tools/gpu_check.sh > "$WORK/gpu_check.log" 2>&1
rc=$?
for cmd in "$@"; do
  echo "==== $cmd" >> "$WORK/extra.log"
  OUT="$WORK" bash -c "$cmd" >> "$WORK/extra.log" 2>&1
done
tar czf "$DEST/results.tgz" -C "$WORK" .
echo "==== failures (first 40)"
grep -E '^(FAILED|ERROR) ' "$WORK/pytest.log" 2>/dev/null | head -n 40
echo "==== extra (last 40 lines)"
tail -n 40 "$WORK/extra.log" 2>/dev/null
echo "==== gpu_check summary"
sed -n '/==== summary ====/,$p' "$WORK/gpu_check.log" | head -n 60
exit $rc
