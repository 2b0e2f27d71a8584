#!/usr/bin/env bash
# Paged decode against torch's unpaged decode: where the 13 points of copy go (session 50's question;
# docs/benchmark-notes.md, paged decode). One device call (the `run` tool, carry .whl), about 250 s:
#   OUT=$OUT bash tools/probe/pending/session50.sh
# 1. Our decode kernel (main's paged_mma.cuh) on the probe's rows in five cache layouts, from the bench's
#    (page size 16, shuffled, kv heads interleaved) to one where each request's keys for a kv head are
#    contiguous spans of 2048 (heads first, pages in order): if the last reaches torch's rate, the paging
#    is the gap; if it stays near 90-95% of copy, the kernel is.
# 2. torch's SDPA on the same work, unpaged (tools/probe/pending/torch_decode.py).
# 3. ncu on the b32 ctx8192 bf16 row, ours (bench layout) and torch's: DRAM throughput, warp stalls,
#    occupancy, L2 hit rate, written to $OUT/ncu_*.txt.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
out=${OUT:-/tmp}
ncu=${NCU:-/usr/local/cuda/bin/ncu}
export WORK=/tmp/pw_paged
t0=$(date +%s)
PROBE_STAGE=build bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh base
export PROBE_STAGE=run
for layout in "" "PAGED_IN_ORDER=1" "PAGED_HEADS_FIRST=1 PAGED_IN_ORDER=1" \
              "PAGED_PAGE_SIZE=256 PAGED_HEADS_FIRST=1 PAGED_IN_ORDER=1" \
              "PAGED_PAGE_SIZE=2048 PAGED_HEADS_FIRST=1 PAGED_IN_ORDER=1"; do
  # shellcheck disable=SC2086
  env $layout bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh base 2>&1 | grep -v "^== "
done
cases=("32 8192 32 8" "64 8192 32 8" "16 4096 64 8" "64 2048 16 4")
python3 tools/probe/pending/torch_decode.py "${cases[0]} 128" "${cases[1]} 128" "${cases[2]} 128" "${cases[3]} 64"
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy
          --section LaunchStats)
if [[ -x $ncu ]]; then
  "$ncu" -k regex:paged_mma_kernel --launch-skip 5 --launch-count 1 "${sections[@]}" "$WORK/base/probe" \
    > "$out/ncu_ours.txt" 2>&1
  "$ncu" -k regex:'flash|fmha|attn|sdpa|splitkv|combine' --launch-skip 3 --launch-count 2 "${sections[@]}" \
    python3 tools/probe/pending/torch_decode.py "32 8192 32 8 128" > "$out/ncu_torch.txt" 2>&1
  grep -hE "^  [a-z_]+.*(void|Kernel)|DRAM Throughput|Memory Throughput|L2 Hit Rate|Achieved Occupancy|Duration|Registers Per|Stall|Warp Cycles Per Issued" \
    "$out/ncu_ours.txt" "$out/ncu_torch.txt" | head -60
else
  echo "no ncu at $ncu"
fi
echo "total $(( $(date +%s) - t0 )) s"
