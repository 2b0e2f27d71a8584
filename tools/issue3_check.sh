#!/usr/bin/env bash
# The issue-3 speed picture in one device call (reductions / softmax / norms): build, the norm and
# softmax row tables, and the sweeps that decide the defaults still open on the H200 (see
# docs/benchmarks.md, "What is left for issue 3"). Writes bench_norm.md / bench_softmax.md to $OUT
# for tools/update_bench_doc.py; the sweep lines are in $OUT/step<N>.log. The .json / .txt copies,
# the sweeps' .md and build.log are removed at the end (the device tool returns at most 8 files:
# five step logs and the two tables). Ran end to end on an H100 in 288 s (session 17).
#   DEADLINE=585 bash tools/issue3_check.sh          # on the device machine
#   SKIP_BUILD=1 DEADLINE=300 bash tools/issue3_check.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
nvidia-smi --query-gpu=name --format=csv,noheader || true
export OUT="${OUT:-/tmp/out}" TAIL="${TAIL:-40}"
bash tools/device_steps.sh \
  "OUT=\$OUT python3 bench/bench_norm.py --family row > /dev/null 2>&1; cut -d'|' -f2-7,11 \$OUT/bench_norm.md | grep -E '^ (rms|layer)_norm' | head -36" \
  "OUT=\$OUT python3 bench/bench_softmax.py 2>&1 | grep -E '^(softmax|log_softmax)' | tail -20" \
  "for m in 512x262144 1048576x64 262144x512; do python3 bench/bench_softmax.py --sweep --match \$m 2>&1 | grep rounds; done" \
  "python3 bench/bench_norm.py --sweep --match 'fwd 2048x65536' 2>&1 | grep -E 'pshared|best'" \
  "python3 bench/bench_norm.py --sweep --match ' bwd 2048x65536' 2>&1 | grep -E 'best|default|pshared|clusters=(26|28|30) '
   python3 bench/bench_norm.py --sweep --match ' bwd 8192x8192' 2>&1 | grep best
   python3 bench/bench_norm.py --sweep --match 'bwd 262144x128' 2>&1 | grep -E 'regacc|best'
   python3 bench/bench_norm.py --sweep --match 'bwd 65536x512' 2>&1 | grep -E 'regacc|best'"
rc=$?
rm -f "$OUT"/*.json "$OUT"/*.txt "$OUT"/*_sweep.md "$OUT"/build.log
exit $rc
