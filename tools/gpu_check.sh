#!/usr/bin/env bash
# One call on the GPU machine: build + install, python -m baracuda, the tests, the benchmark,
# and a short summary printed LAST (the device reply keeps only the end of the output).
#
#   bash tools/gpu_check.sh                 # everything
#   bash tools/gpu_check.sh --quick         # arguments go to every bench/bench_<family>.py
#   BENCHES=elementwise SKIP_BUILD=1 SKIP_TESTS=1 bash tools/gpu_check.sh --rows silu
#   PYTEST_ARGS='-k exp' BENCH_ARGS='--quick' bash tools/gpu_check.sh
#
# Knobs: SKIP_BUILD=1, SKIP_TESTS=1, SKIP_BENCH=1, REGENERATE=1 (stubs + docs/ops.md from
# this build, copied to $OUT/generated), BENCHES (families, default: every
# bench/bench_*.py), PYTEST_ARGS, BENCH_ARGS, PYTEST_TIMEOUT (s, per test, default 600),
# BARACUDA_CUDA_ARCHS (default 90). Logs and results go to ${OUT:-/tmp/out}:
# build.log, pytest.log, bench_<family>.{log,md,json,txt}.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT"
export OUT
export PIP_DISABLE_PIP_VERSION_CHECK=1
# JAX tests in the same pytest process must not take 75% of the GPU up front.
export XLA_PYTHON_CLIENT_PREALLOCATE="${XLA_PYTHON_CLIENT_PREALLOCATE:-false}"
ARCHS="${BARACUDA_CUDA_ARCHS:-90}"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
section() { printf '\n==== %s ====\n' "$*"; }
T0=$(now)

section "device and versions"
nvidia-smi -L || echo "nvidia-smi -L failed"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
  --format=csv || true
python3 --version
(nvcc --version | tail -n 2) || echo "nvcc: not found"
(cmake --version | head -n 1) || echo "cmake: not found"
echo "ninja $(ninja --version 2>/dev/null || echo 'not found')"
python3 - <<'EOF' || true
import importlib
for name in ("torch", "cupy", "jax", "numpy", "nanobind", "scikit_build_core", "pytest"):
    try:
        m = importlib.import_module(name)
        extra = ""
        if name == "torch":
            extra = f" (CUDA {m.version.cuda}, device: {m.cuda.get_device_name() if m.cuda.is_available() else 'none'})"
        print(f"{name} {getattr(m, '__version__', '?')}{extra}")
    except Exception as e:  # noqa: BLE001
        print(f"{name}: not importable ({type(e).__name__}: {e})")
EOF

# ---- build + install ---------------------------------------------------------------------
build_status="skipped (SKIP_BUILD=1)"
if [[ "${SKIP_BUILD:-0}" != "1" ]]; then
  section "build + install (BARACUDA_CUDA_ARCHS=$ARCHS), log: $OUT/build.log"
  tb=$(now)
  python3 tools/source_mtimes.py restore build/.source_mtimes  # a warm machine's build/: only what changed
  if BARACUDA_CUDA_ARCHS="$ARCHS" python3 -m pip install --no-build-isolation --no-deps -v . >"$OUT/build.log" 2>&1; then
    python3 tools/source_mtimes.py save build/.source_mtimes
    build_status="ok in $(since "$tb") s"
    echo "build: $build_status"
  else
    build_status="FAILED after $(since "$tb") s"
    echo "build: $build_status; last lines of $OUT/build.log:"
    tail -n 80 "$OUT/build.log"
    section "summary"
    echo "build:  $build_status (see $OUT/build.log)"
    echo "total:  $(since "$T0") s"
    exit 1
  fi
fi

section "python3 -m baracuda"
info_status=ok
python3 -m baracuda || info_status="FAILED (exit $?)"

# ---- generated files (REGENERATE=1): stubs and docs/ops.md from this build, also into $OUT ---
if [[ "${REGENERATE:-0}" == "1" ]]; then
  section "regenerate stubs/baracuda/_C.pyi and docs/ops.md"
  (cd "$(mktemp -d)" && python3 -m nanobind.stubgen -q -m baracuda._C -o "$OLDPWD/stubs/baracuda/_C.pyi")
  python3 tools/gen_ops_doc.py
  mkdir -p "$OUT/generated"
  cp stubs/baracuda/_C.pyi docs/ops.md "$OUT/generated/"
  # the installed package carries its own copy of the stub: refresh it too
  cp stubs/baracuda/_C.pyi "$(python3 -c 'import baracuda, os; print(os.path.dirname(baracuda.__file__))')/_C.pyi"
fi

# ---- tests -------------------------------------------------------------------------------
tests_status="skipped (SKIP_TESTS=1)"
test_counts=""
failed_lines=""
if [[ "${SKIP_TESTS:-0}" != "1" ]]; then
  eval "pytest_extra=(${PYTEST_ARGS:-})"
  section "pytest -q --tb=line -rf --timeout=${PYTEST_TIMEOUT:-600} tests ${PYTEST_ARGS:-}"
  tt=$(now)
  set +e
  python3 -m pytest -q --tb=line -rf --timeout="${PYTEST_TIMEOUT:-600}" tests ${pytest_extra[@]+"${pytest_extra[@]}"} 2>&1 \
    | tee "$OUT/pytest.log"
  pytest_rc=${PIPESTATUS[0]}
  set -e
  # pytest's closing line, e.g. "3 failed, 120 passed, 2 skipped in 12.3s" or "no tests ran in 0.01s".
  last=$(grep -E '(passed|failed|errors?|skipped|deselected|xfailed|xpassed|no tests ran).* in [0-9.]+s' \
           "$OUT/pytest.log" | tail -n 1 | sed -e 's/=//g' -e 's/^ *//' -e 's/ *$//' || true)
  count() { { echo "$last" | grep -Eo "[0-9]+ $1" | head -n 1 | grep -Eo '^[0-9]+'; } || echo 0; }
  case "$pytest_rc" in
    0) tests_status="ok" ;;
    1) tests_status="FAILED (some tests failed)" ;;
    5) tests_status="no tests collected" ;;
    *) tests_status="FAILED (pytest exit $pytest_rc)" ;;
  esac
  if [[ -n "$last" ]]; then
    test_counts="$(count passed) passed, $(count failed) failed, $(count skipped) skipped, $(count error) errors  [$last]"
  else
    test_counts="no pytest summary line (timeout or crash?); see $OUT/pytest.log"
  fi
  test_counts="$test_counts; $(since "$tt") s"
  failed_lines=$(grep -E '^(FAILED|ERROR) ' "$OUT/pytest.log" | head -n 10 || true)
fi

# ---- benchmarks: bench/bench_<family>.py for each family in BENCHES ------------------------
BENCHES=${BENCHES:-$(ls bench/bench_*.py | sed -e 's#bench/bench_##' -e 's#\.py##' | tr '\n' ' ')}
bench_status="skipped (SKIP_BENCH=1)"
bench_rc=0
if [[ "${SKIP_BENCH:-0}" != "1" ]]; then
  eval "bench_extra=(${BENCH_ARGS:-})"
  bench_status=""
  for fam in $BENCHES; do
    section "python3 bench/bench_$fam.py ${BENCH_ARGS:-} $*"
    rm -f "$OUT/bench_$fam.txt"
    tbe=$(now)
    set +e
    python3 bench/bench_$fam.py ${bench_extra[@]+"${bench_extra[@]}"} "$@" 2>&1 | tee "$OUT/bench_$fam.log"
    rc=${PIPESTATUS[0]}
    set -e
    case "$rc" in
      0) bench_status+=" $fam: ok in $(since "$tbe") s;" ;;
      3) bench_status+=" $fam: failed rows (exit 3; see the table);" ;;
      *) bench_status+=" $fam: FAILED (exit $rc; see $OUT/bench_$fam.log);" ;;
    esac
    [[ "$rc" == 0 ]] || bench_rc=$rc
  done
  python3 tools/plot_bench.py "$OUT" --out "$OUT/img" > /dev/null 2>&1 || true  # SVG charts of the tables
fi

# ---- summary (last, short) ---------------------------------------------------------------
section "summary"
echo "device: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || echo '?')"
echo "build:  $build_status"
echo "info:   python3 -m baracuda: $info_status"
echo "tests:  $tests_status${test_counts:+ -- $test_counts}"
if [[ -n "$failed_lines" ]]; then
  echo "$failed_lines" | sed 's/^/        /'
fi
echo "bench:  $bench_status"
if [[ "${SKIP_BENCH:-0}" != "1" ]]; then
  for fam in $BENCHES; do
    if [[ -s "$OUT/bench_$fam.txt" ]]; then
      echo
      cat "$OUT/bench_$fam.txt"
    else
      echo "(no $fam table; last lines of $OUT/bench_$fam.log:)"
      tail -n 20 "$OUT/bench_$fam.log" || true
    fi
  done
fi
echo
echo "total:  $(since "$T0") s; logs and results in $OUT"
# Everything ran; the exit status still says whether it all passed (0) or not (1).
[[ "$info_status" == ok ]] || exit 1
[[ "${pytest_rc:-0}" == 0 || "${pytest_rc:-0}" == 5 ]] || exit 1
[[ "${bench_rc:-0}" == 0 ]] || exit 1
exit 0
