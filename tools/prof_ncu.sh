#!/usr/bin/env bash
# usage: prof.sh name kernel_regex op kind shape [env]
NCU=/usr/local/cuda/bin/ncu
name=$1; kr=$2; shift 2
$NCU --kernel-name regex:"$kr" --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis python3 tools/profile_one.py "$@" > $OUT/ncu_$name.txt 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Block Limit|Stall|Warp Cycles Per Issued|Grid Size|Dynamic Shared|Waves" $OUT/ncu_$name.txt | head -40
