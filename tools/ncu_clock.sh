#!/usr/bin/env bash
# How much a kernel's time depends on the SM clock (on the device machine): ncu times it with the
# clocks locked at base (--clock-control base) and left free (none; boost), medians of 5 launches.
# A memory-bound kernel keeps its time when the SM clock drops; one that leans on issue slots or
# on-chip latency slows by up to the clock ratio. Why: the H200 moves ~1.43x the bytes per SM
# cycle of the H100 (4.8 vs 3.35 TB/s at the same 1.98 GHz), so slowing the H100's SM clock by
# base / boost (~0.8) is the nearest thing to an H200 this machine has: a kernel whose time grows
# here is the one that falls short of the H200's copy rate. Cases as in ncu_issue.sh:
#   bash tools/ncu_clock.sh                                # the default cases
#   bash tools/ncu_clock.sh "lnb65k bwd_cluster layer_norm bwd 2048x65536" ...
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NCU=${NCU:-/usr/local/cuda/bin/ncu}
source tools/ncu_cases.sh
cases=("$@")
((${#cases[@]})) || cases=("${NCU_DEFAULT_CASES[@]}")
# median kernel time (us) and SM clock (GHz) over the profiled launches, one ncu run
measure() {
  "$NCU" --clock-control "$1" --kernel-name regex:"$2" --launch-skip 2 --launch-count 5 --csv \
    --metrics gpu__time_duration.sum,smsp__cycles_elapsed.avg.per_second \
    python3 tools/profile_one.py "${@:3}" --reps 8 2>/dev/null |
    python3 tools/ncu_csv_median.py
}
printf '%-9s %10s %6s %10s %6s %8s\n' case us@base GHz us@boost GHz slowdown
for c in "${cases[@]}"; do
  read -r name kr op kind shape <<< "$c"
  read -r tb fb <<< "$(measure base "$kr" "$op" "$kind" "$shape")"
  read -r tn fn <<< "$(measure none "$kr" "$op" "$kind" "$shape")"
  printf '%-9s %10s %6s %10s %6s %8s\n' "$name" "$tb" "$fb" "$tn" "$fn" \
    "$(python3 -c "print(f'{$tb / $tn:.3f}')" 2>/dev/null || echo nan)"
done
