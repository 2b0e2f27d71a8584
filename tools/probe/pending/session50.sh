#!/usr/bin/env bash
# Session 50's two device questions, one call (about 400 s; README.md beside this file):
#   bash tools/probe/pending/session50.sh prepare    # here, on a clean checkout: main's backward header to
#                                                    # tools/probe/.v/, the one-pass patch applied
#   OUT=$OUT bash tools/probe/pending/session50.sh run   # on the device (the `run` tool; carry .whl)
#   git checkout cuda cpp tests tools && rm -rf tools/probe/.v   # here, afterwards (or land what won)
# A. Paged decode against torch's unpaged decode, where the 13 points of copy go: our kernel (main's
#    paged_mma.cuh) in five cache layouts, from the bench's (page size 16, shuffled, kv heads
#    interleaved) to contiguous 2048-key spans per kv head; torch's SDPA on the same work
#    (torch_decode.py); ncu on the b32 ctx8192 row of both ($OUT/ncu_*.txt). If the contiguous layout
#    reaches torch's rate, the paging is the gap; if it stays near 90-95% of copy, the kernel is. Beside
#    them, bf16 caches on 128-key tiles with four warps (base) and eight (w8: 16 keys a warp, half the
#    barriers per byte; one block per SM either way), and `bulk` (paged_bulk_rows.patch): 16-bit tiles
#    by one bulk copy per key row on the stage's mbarrier instead of 16-byte cp.async chunks (Hopper).
# B. The one-pass sm_90a backward (attention_bwd_sm90_one_pass.patch): base = main's two kernels, new =
#    grad_k / grad_v's kernel adding dQ into an f32 accumulator by bulk reductions (BWD_DQ_ACCUM=1 makes
#    the harness pass one); the float64 check first, torch's FA2 backward on the same rows.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
pending=tools/probe/pending
case ${1:-} in
  prepare)
    git diff --quiet -- cuda cpp tests tools || { echo "cuda/ cpp/ tests/ tools/ have changes: start clean"; exit 2; }
    mkdir -p tools/probe/.v
    git show HEAD:cuda/fa2/flash_bwd_sm90.cuh > tools/probe/.v/bwd_sm90_main.cuh
    cp cuda/paged_attention/paged_mma.cuh tools/probe/.v/paged_bulk.cuh
    patch -s tools/probe/.v/paged_bulk.cuh < $pending/paged_bulk_rows.patch
    git apply $pending/attention_bwd_sm90_one_pass.patch
    git status --short ;;
  run)
    [[ -f tools/probe/.v/bwd_sm90_main.cuh ]] || { echo "run 'prepare' here first"; exit 2; }
    python3 -m pip install -q --no-index --no-deps .whl/nvidia_cutlass-*.whl
    out=${OUT:-/tmp}
    ncu=${NCU:-/usr/local/cuda/bin/ncu}
    t0=$(date +%s)
    bwd=(cuda/fa2/flash_bwd_sm90.cuh base@tools/probe/.v/bwd_sm90_main.cuh new)
    WORK=/tmp/pw_bwd PROBE_STAGE=build bash tools/probe/probe.sh attention_bwd_sm90 "${bwd[@]}" \
      > "$out/build_bwd_sm90.log" 2>&1 &
    w8='s/static constexpr int kWarps = 4, kThreads/static constexpr int kWarps = (WIDE || FP8) ? 4 : TILE \/ 16, kThreads/;'
    w8+=' s/: S == 2 ? (D <= 64/: kWarps == 8 ? 1 : S == 2 ? (D <= 64/'
    WORK=/tmp/pw_paged PROBE_STAGE=build bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh base \
      "w8=$w8" bulk@tools/probe/.v/paged_bulk.cuh > "$out/build_paged.log" 2>&1 &
    wait
    echo "built in $(( $(date +%s) - t0 )) s"
    grep -h "Used" "$out"/build_*.log | sed 's/(Geometry.*type)//'
    export PROBE_STAGE=run
    # A
    for layout in "" "PAGED_IN_ORDER=1" "PAGED_HEADS_FIRST=1 PAGED_IN_ORDER=1" \
                  "PAGED_PAGE_SIZE=256 PAGED_HEADS_FIRST=1 PAGED_IN_ORDER=1" \
                  "PAGED_PAGE_SIZE=2048 PAGED_HEADS_FIRST=1 PAGED_IN_ORDER=1"; do
      # shellcheck disable=SC2086
      env $layout WORK=/tmp/pw_paged bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh base 2>&1 |
        grep -v "^== "
    done
    WORK=/tmp/pw_paged bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh "w8=$w8" \
      bulk@tools/probe/.v/paged_bulk.cuh
    PAGED_HEADS_FIRST=1 PAGED_IN_ORDER=1 WORK=/tmp/pw_paged \
      bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh bulk@tools/probe/.v/paged_bulk.cuh
    python3 $pending/torch_decode.py "32 8192 32 8 128" "64 8192 32 8 128" "16 4096 64 8 128" "64 2048 16 4 64"
    # B
    rows='8 2048 16 16 128 1;4 4096 32 8 128 1;8 2048 32 32 64 1;32 512 16 16 128 1;8 2048 16 16 128 0;2 8192 16 16 128 1'
    BWD_DQ_ACCUM=1 WORK=/tmp/pw_bwd PROBE_ARGS="check;$rows" bash tools/probe/probe.sh attention_bwd_sm90 "${bwd[@]}"
    IFS=';' read -ra bwd_cases <<< "$rows"
    python3 tools/probe/torch_sdpa.py --backward "${bwd_cases[@]}"
    # A's profiles last (the slowest part)
    if [[ -x $ncu ]]; then
      sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy
                --section LaunchStats)
      "$ncu" -k regex:paged_mma_kernel --launch-skip 5 --launch-count 1 "${sections[@]}" /tmp/pw_paged/paged/base/probe \
        > "$out/ncu_ours.txt" 2>&1
      "$ncu" -k regex:'flash|fmha|attn|sdpa|splitkv|combine' --launch-skip 3 --launch-count 2 "${sections[@]}" \
        python3 $pending/torch_decode.py "32 8192 32 8 128" > "$out/ncu_torch.txt" 2>&1
      grep -hE "^  [A-Za-z_].*\(|DRAM Throughput|Memory Throughput|L2 Hit Rate|Achieved Occupancy|Duration|Stall|Warp Cycles Per Issued" \
        "$out/ncu_ours.txt" "$out/ncu_torch.txt" | head -60
    else
      echo "no ncu at $ncu"
    fi
    echo "total $(( $(date +%s) - t0 )) s" ;;
  *) sed -n '2,16p' "$0"; exit 2 ;;
esac
