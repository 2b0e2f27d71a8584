#!/usr/bin/env bash
# ncu on one kernel of one row op (tools/profile_one.py), on the device machine. Usage:
#   bash tools/prof_ncu.sh NAME KERNEL_REGEX OP KIND SHAPE      e.g.  lnbwd bwd_cluster layer_norm bwd 2048x65536
# Writes $OUT/ncu_NAME.txt (sections + raw warp-stall metrics) and prints the key lines.
NCU=${NCU:-/usr/local/cuda/bin/ncu}
name=$1; kr=$2; shift 2
OUT=${OUT:-/tmp/out}
$NCU --kernel-name regex:"$kr" --launch-skip 2 --launch-count 1 --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section SchedulerStats --section WarpStateStats --page raw \
  python3 tools/profile_one.py "$@" > "$OUT/ncu_$name.txt" 2>&1
grep -E "gpu__time_duration.sum|dram__throughput.avg.pct|sm__warps_active.avg.pct|smsp__issue_active.avg.per_cycle_active|launch__registers_per_thread|launch__grid_size|smsp__average_warps_issue_stalled_.*_per_issue_active" \
  "$OUT/ncu_$name.txt" | awk '{ if ($NF+0 > 0.05 || $0 !~ /stalled/) print }' | sed -E 's/ +/ /g' | head -40
