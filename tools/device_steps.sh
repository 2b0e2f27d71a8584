#!/usr/bin/env bash
# A device call under a deadline: build + install (unless SKIP_BUILD=1), then each step in order,
# each given only the time left, its output streamed into $OUT/steps.log (so a call cut at its limit
# still returns what ran); the benches' tables ($OUT/<bench>.md) land in $OUT too, their .json / .txt
# and the build log stay in $WORK (the device tool returns only a few files). Usage on the device:
#   DEADLINE=560 bash tools/device_steps.sh "python3 bench/bench_norm.py --sweep" "python3 -m pytest -q tests/x.py"
# Prints, last, one line per step (exit status, seconds) and the tail of each step's log.
# A quick check of Python-side changes on little device time (device code PTX-only at -O0, slow at
# run time, no flash or CUTLASS kernels; ~110 s to build instead of ~240):
#   BARACUDA_CUDA_ARCHS=90-virtual BARACUDA_CHECK_BUILD=1 \
#   CMAKE_ARGS="-DBARACUDA_ENABLE_FA2=OFF -DBARACUDA_ENABLE_CUTLASS=OFF" DEADLINE=170 bash tools/device_steps.sh "..."
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/out}"
WORK="${WORK:-/tmp/device_steps}"
mkdir -p "$OUT" "$WORK/bench"
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
export XLA_PYTHON_CLIENT_PREALLOCATE="${XLA_PYTHON_CLIENT_PREALLOCATE:-false}"
DEADLINE="${DEADLINE:-560}"
T0=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
summary=()
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader || true
bash tools/carried_wheels.sh "$WORK/carried_wheels.log"
if [[ "${SKIP_BUILD:-0}" != "1" ]]; then
  tb=$(date +%s)
  # On a warm machine build/ is still there: rebuild only what changed since its last build.
  summary+=("$(python3 tools/source_mtimes.py restore build/.source_mtimes)")
  # Each build log line stamped with its second, so the phases around ninja (configure, wheel, install) show.
  if BARACUDA_CUDA_ARCHS="${BARACUDA_CUDA_ARCHS:-90}" python3 -m pip install --no-build-isolation --no-deps -v . 2>&1 \
       | python3 -u -c 'import sys, time; t = time.time(); [print(f"{time.time() - t:6.1f} {l}", end="") for l in sys.stdin]' \
       > "$WORK/build.log"; then
    python3 tools/source_mtimes.py save build/.source_mtimes
    summary+=("build: ok $(( $(date +%s) - tb )) s")
    grep -E "Configuring done|Generating done| \[1/[0-9]+\]|Installing:|Created wheel|Successfully installed|Building wheel" \
      "$WORK/build.log" > "$OUT/build_phases.txt"
    grep -E " \[[0-9]+/[0-9]+\]" "$WORK/build.log" | tail -n 1 >> "$OUT/build_phases.txt"
    find build -maxdepth 4 -name "*.so" -size +1M -printf "%s bytes: %p\n" >> "$OUT/build_phases.txt"
    summary+=("build phases (s from pip's start): $(tr '\n' '|' < "$OUT/build_phases.txt" | cut -c1-600)")
    # The device build's longest units (issue 22 bounds the 16-core build: its critical path).
    summary+=("$(python3 tools/slowest_tus.py --top 5 2>&1 | tee "$OUT/slowest_tus.txt")")
    cp build/*/.ninja_log "$OUT/ninja_log.txt" 2>/dev/null  # the whole timeline, for tools/slowest_tus.py here
  else
    tail -n 60 "$WORK/build.log"
    echo "build: FAILED after $(( $(date +%s) - tb )) s"
    exit 1
  fi
fi
n=0
for step in "$@"; do
  n=$((n + 1))
  t=$(left)
  if (( t < 15 )); then summary+=("step $n: skipped (deadline): $step"); continue; fi
  ts=$(date +%s)
  echo "==== step $n: $step" >> "$OUT/steps.log"
  # Streamed into steps.log as it runs (a step cut by the tool's own limit keeps what it printed).
  OUT="$WORK/bench" timeout "$t" bash -c "$step" 2>&1 | tee "$WORK/step$n.log" >> "$OUT/steps.log"
  rc=${PIPESTATUS[0]}
  echo "==== step $n: rc=$rc, $(( $(date +%s) - ts )) s" >> "$OUT/steps.log"
  cp "$WORK"/bench/*.md "$OUT"/ 2>/dev/null
  summary+=("step $n: rc=$rc $(( $(date +%s) - ts )) s: $step")
done
for ((i = 1; i <= n; i++)); do
  [[ -f "$WORK/step$i.log" ]] || continue
  echo "==== step $i (last ${TAIL:-25} lines)"
  tail -n "${TAIL:-25}" "$WORK/step$i.log"
done
echo "==== summary ($(( $(date +%s) - T0 )) s)"
printf '%s\n' "${summary[@]}"
