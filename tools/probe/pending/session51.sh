#!/usr/bin/env bash
# Session 51's device questions, two calls (README.md beside this file):
#   bash tools/probe/pending/session51.sh prepare          # here, on a clean checkout: .v copies, B applied
#   OUT=$OUT bash tools/probe/pending/session51.sh run A   # on the device (the `run` tool; carry .whl): ~350 s
#   OUT=$OUT bash tools/probe/pending/session51.sh run B C # the second call: ~280 s
#   git checkout cuda cpp tests tools && rm -rf tools/probe/.v   # here, afterwards (or land what won)
# A. Paged decode (paged_row_offsets.patch, paged_row_offsets_zero.patch, paged_fp8_swizzle.patch), below.
# C. attention_bwd_mma_staged_stats.patch: the mma.sync grad_k / grad_v kernel stages each query tile's
#    lse and delta beside its Q tile (StagedQueryStats, as the sm_90a kernel does) instead of 32
#    global loads per step; ptxas: d64 239 registers and no spills (main 255 and 32 bytes), d128 248
#    (main 255). base = main, staged = the patched header; the float64 check, torch's FA2 from B.
# B. attention_bwd_sm90_one_pass_red.patch: the one-pass sm_90a backward again, dQ^T's fragment added
#    by each thread's atomic adds from registers (session 50's form staged it in shared memory and had
#    one thread issue a bulk reduction per row: 0.55-0.72x main). prepare applies it to the tree (plan
#    side and tests too); base = main's header (.v/bwd_sm90_main.cuh), new = the patched one, the
#    harness passing the accumulator (BWD_DQ_ACCUM=1); the float64 check first, torch's FA2 beside.
#    Pairs of adjacent queries by red.global.add.v2.f32 into a transposed accumulator [hq][d][rows].
#    ptxas here: d128 246 registers (main 246), d64 163 at three blocks per SM, no spills.
# paged_row_offsets.patch: each key row's K and V byte offsets computed once per tile (by the thread
# that reads its page) into the page ring, and each copying thread keeping one column chunk, so a
# row's two 16-byte copies cost about 18 SASS instructions instead of 55-59 (sm_90, d128 bf16: the
# copy loop of a 64-key tile 144 instructions a thread instead of 474). Main's kernel is slower at
# ncu's locked SM clock (1.23x) where cuDNN's is not: instructions per key are the suspect. Rows:
# the harness's (bf16 and fp8 caches), torch's unpaged SDPA beside them, then ncu's instruction and
# sector counts on b32 ctx8192 for each variant.
# paged_row_offsets_zero.patch (`offz`, the offsets too): an absent row of a 16-bit cache copies a
# static row of zeros instead of zero-filling, so the copy loop carries no predicate (12.75 SASS
# instructions a row instead of 18; fp8 caches keep the predicate, their d128 t128 kernel would spill).
# paged_fp8_swizzle.patch (`fp8swz`, the offsets too): fp8 raw rows of 128 bytes or more unpadded and
# swizzled like the 16-bit stages (main pads them to D + 16 bytes: off 128-byte alignment, as the 16-bit
# rows were before the swizzle halved their L2 sector requests); the fragment reads follow the swizzle.
# Session 39's swizzle of these rows also let a third block onto the SM; here the page ring's offsets
# keep d128 t128 at two. Compare the fp8 rows (and their checksums: the same math, the same bits).
# The harness's rows now include b128 ctx1024 d128 and d64 bf16 on 128-key tiles (select offers 64 at
# 16 bits; at d64 a 128-key tile is d128's 64-key bytes: if it beats the t64 d64 row, offer it).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
pending=tools/probe/pending
bwd_rows='8 2048 16 16 128 1;4 4096 32 8 128 1;8 2048 32 32 64 1;32 512 16 16 128 1;8 2048 16 16 128 0;2 8192 16 16 128 1'
case ${1:-} in
  prepare)
    git diff --quiet -- cuda cpp tests tools || { echo "cuda/ cpp/ tests/ tools/ have changes: start clean"; exit 2; }
    mkdir -p tools/probe/.v
    for v in offsets fp8swz offz; do git show HEAD:cuda/paged_attention/paged_mma.cuh > tools/probe/.v/paged_$v.cuh; done
    git show HEAD:cuda/fa2/flash_bwd_sm90.cuh > tools/probe/.v/bwd_sm90_main.cuh
    git show HEAD:cuda/fa2/flash_bwd.cuh > tools/probe/.v/bwd_staged.cuh
    patch -s tools/probe/.v/paged_offsets.cuh < $pending/paged_row_offsets.patch
    patch -s tools/probe/.v/paged_fp8swz.cuh < $pending/paged_fp8_swizzle.patch
    patch -s tools/probe/.v/paged_offz.cuh < $pending/paged_row_offsets_zero.patch
    patch -s tools/probe/.v/bwd_staged.cuh < $pending/attention_bwd_mma_staged_stats.patch
    git apply $pending/attention_bwd_sm90_one_pass_red.patch
    git status --short ;;
  run)
    [[ -f tools/probe/.v/paged_offsets.cuh ]] || { echo "run 'prepare' here first"; exit 2; }
    shift
    parts=" ${*:-A B C} "
    out=${OUT:-/tmp}
    t0=$(date +%s)
    python3 -m pip install -q --no-index --no-deps .whl/nvidia_cutlass-*.whl
    paged=(base offsets@tools/probe/.v/paged_offsets.cuh offz@tools/probe/.v/paged_offz.cuh
           fp8swz@tools/probe/.v/paged_fp8swz.cuh)
    bwd=(cuda/fa2/flash_bwd_sm90.cuh base@tools/probe/.v/bwd_sm90_main.cuh new)
    mma=(cuda/fa2/flash_bwd.cuh base staged@tools/probe/.v/bwd_staged.cuh)
    [[ $parts == *" A "* ]] && WORK=/tmp/pw PROBE_STAGE=build bash tools/probe/probe.sh paged \
      cuda/paged_attention/paged_mma.cuh "${paged[@]}" > "$out/build_paged.log" 2>&1 &
    [[ $parts == *" B "* ]] && WORK=/tmp/pw_bwd PROBE_STAGE=build bash tools/probe/probe.sh attention_bwd_sm90 \
      "${bwd[@]}" > "$out/build_bwd_sm90.log" 2>&1 &
    [[ $parts == *" C "* ]] && WORK=/tmp/pw_mma PROBE_STAGE=build bash tools/probe/probe.sh attention_bwd \
      "${mma[@]}" > "$out/build_bwd_mma.log" 2>&1 &
    wait
    echo "built in $(( $(date +%s) - t0 )) s"
    grep -h "Used" "$out"/build_*.log | sed 's/(Geometry.*type)//'
    export PROBE_STAGE=run
    if [[ $parts == *" B "* ]]; then
      BWD_DQ_ACCUM=1 WORK=/tmp/pw_bwd PROBE_ARGS="check;$bwd_rows" bash tools/probe/probe.sh attention_bwd_sm90 "${bwd[@]}"
    fi
    if [[ $parts == *" C "* ]]; then
      WORK=/tmp/pw_mma PROBE_ARGS="check;$bwd_rows" bash tools/probe/probe.sh attention_bwd "${mma[@]}"
    fi
    if [[ $parts == *" B "* || $parts == *" C "* ]]; then
      IFS=';' read -ra bwd_cases <<< "$bwd_rows"
      python3 tools/probe/torch_sdpa.py --backward "${bwd_cases[@]}"
    fi
    if [[ $parts == *" A "* ]]; then
      WORK=/tmp/pw bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh base offsets offz fp8swz base offz
      python3 $pending/torch_decode.py "32 8192 32 8 128" "64 8192 32 8 128" "16 4096 64 8 128" "64 2048 16 4 64"
      m=smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__sectors_read.sum,gpu__time_duration.sum
      for v in base offsets offz; do
        /usr/local/cuda/bin/ncu -k regex:paged_mma_kernel --launch-skip 5 --launch-count 1 --metrics $m \
          /tmp/pw/paged/$v/probe 2>&1 | grep -E "^  [a-z_]|smsp__|lts__|dram__|gpu__" | sed "s/^/$v /"
      done
      /usr/local/cuda/bin/ncu -k regex:'fmha|sdpa|flash' --launch-skip 3 --launch-count 1 --metrics $m \
        python3 $pending/torch_decode.py "32 8192 32 8 128" 2>&1 | grep -E "smsp__|lts__|dram__|gpu__" | sed "s/^/torch /"
    fi
    echo "total $(( $(date +%s) - t0 )) s" ;;
  *) sed -n '2,40p' "$0"; exit 2 ;;
esac
