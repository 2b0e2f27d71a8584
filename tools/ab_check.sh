#!/usr/bin/env bash
# A / B in one device call: the working tree with PATCH reversed (A, the baseline) and as it is
# (B). Each is built once into a wheel (the second build is incremental: the build dir persists),
# then the wheels are installed in turn and the same command run A B A B ... (a clock or machine
# drift shows as a round-to-round difference, not as a verdict). Make the patch here with
#   git diff -- cuda cpp > ab.patch        (untracked, so the device copy carries it; not committed)
# then on the device machine (the call carrying .whl, so that both builds have the CUTLASS / cuDNN
# headers; tools/carried_wheels.sh installs them):
#   DEADLINE=580 bash tools/ab_check.sh ab.patch "python3 bench/bench_norm.py --family row --kind bwd"
# The command sees AB_VARIANT=A / B. Logs: $OUT/ab_A<round>.log, $OUT/ab_B<round>.log; the last TAIL lines of each are printed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PATCH=$1; CMD=$2
OUT="${OUT:-/tmp/out}"; TAIL="${TAIL:-30}"; ROUNDS="${ROUNDS:-2}"; DEADLINE="${DEADLINE:-560}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 BARACUDA_CUDA_ARCHS="${BARACUDA_CUDA_ARCHS:-90}"
T0=$(date +%s)
WH=/tmp/ab_wheels
rm -rf "$WH"; mkdir -p "$WH/A" "$WH/B"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader || true
apply() { git apply "$@" "$PATCH" 2>/dev/null || patch -s -p1 ${1:+-R} < "$PATCH"; }
wheel() {  # wheel <A|B>: the current tree's wheel into $WH/<A|B>
  local tb=$(date +%s)
  if ! python3 -m pip wheel --no-build-isolation --no-deps -w "$WH/$1" . > "$OUT/build_$1.log" 2>&1; then
    tail -n 40 "$OUT/build_$1.log"; echo "build $1: FAILED"; return 1
  fi
  echo "build $1: ok $(( $(date +%s) - tb )) s"
}
bash tools/carried_wheels.sh  # else both builds lack the CUTLASS / cuDNN kernels
rm -f build/.source_mtimes  # the builds below leave objects of either variant: the next build starts clean
apply -R || { echo "ab_check: $PATCH does not reverse on this tree"; exit 1; }
wheel A; ok=$?
apply  # the tree as it came, whatever happened
((ok == 0)) && wheel B || exit 1
rm -f "$OUT"/build_*.log
for ((r = 1; r <= ROUNDS; r++)); do
  for v in A B; do
    left=$((DEADLINE - ($(date +%s) - T0)))
    if (( left < 30 )); then echo "round $r $v: skipped (deadline)"; continue; fi
    python3 -m pip install --no-deps --force-reinstall -q "$WH/$v"/*.whl > /dev/null 2>&1 || { echo "install $v failed"; exit 1; }
    AB_VARIANT=$v timeout "$left" bash -c "$CMD" > "$OUT/ab_${v}${r}.log" 2>&1
    echo "round $r $v: rc=$? ($(( $(date +%s) - T0 )) s)"
  done
done
for f in "$OUT"/ab_*.log; do echo "==== $(basename "$f")"; tail -n "$TAIL" "$f"; done
