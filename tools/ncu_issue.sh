#!/usr/bin/env bash
# Issue-slot use of the long-row kernels under ncu (on the device machine): one line per case with
# the kernel time, issue-active per scheduler cycle, active warps and registers. A kernel whose
# issue-active is high near its copy rate on one GPU is issue-bound on a GPU with more bandwidth
# per SM cycle (H200 over H100: ~1.4x), so this is the H100 proxy for the H200 gap. (No DRAM
# column: prof_ncu.sh's raw page did not give this script a dram__throughput value.)
#   bash tools/ncu_issue.sh                    # the default cases
#   bash tools/ncu_issue.sh "lnf fwd_reg layer_norm fwd 2048x65536" ...
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-/tmp/out}
source tools/ncu_cases.sh
cases=("$@")
((${#cases[@]})) || cases=("${NCU_DEFAULT_CASES[@]}")
printf '%-9s %10s %7s %7s %5s\n' case us issue warps% regs
get() { grep -E "$1" "$f" | head -1 | awk '{print $NF}'; }  # a metric's value in ncu file $f
for c in "${cases[@]}"; do
  read -r name kr op kind shape <<< "$c"
  bash tools/prof_ncu.sh "$name" "$kr" "$op" "$kind" "$shape" > /dev/null 2>&1
  f="$OUT/ncu_$name.txt"
  printf '%-9s %10s %7s %7s %5s\n' "$name" "$(get 'gpu__time_duration.sum')" \
    "$(get 'smsp__issue_active.avg.per_cycle_active')" "$(get 'sm__warps_active.avg.pct_of_peak')" "$(get 'launch__registers_per_thread')"
done
