#!/usr/bin/env bash
# Session 52's device questions (README.md beside this file), one call of about 250 s:
#   bash tools/probe/pending/session52.sh prepare     # here, on a clean checkout: the variant header in .v
#   bash tools/probe/pending/session52.sh run         # on the device (the `run` tool)
#   git checkout cuda tests && rm -rf tools/probe/.v  # here, afterwards (or land the patch if it won)
# paged_fp8_f16_math.patch: bf16 queries over fp8 caches run Q K^T and P V in f16 (K and V bytes one
# cvt a pair instead of four; Q rows scaled by one power of two per block into f16's range, undone in
# the score's scale). SASS here: the fp8 bf16-query kernels 13-25% fewer instructions (d128 t128
# 5778 -> 4426), the f16-query and 16-bit kernels identical, no spills at sm_80 or sm_90.
# s3: three shared-memory stages (two tiles in flight; d128 at two blocks per SM instead of three). Session
# 51 found no gain, but that was before the copy loop got lighter. The split sweep adds b128 ctx1024 at 3-4 splits.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
pending=tools/probe/pending
case ${1:-} in
  prepare)
    git diff --quiet -- cuda tests || { echo "cuda/ tests/ have changes: start clean"; exit 2; }
    mkdir -p tools/probe/.v
    git apply $pending/paged_fp8_f16_math.patch
    cp cuda/paged_attention/paged_mma.cuh tools/probe/.v/paged_fp8f16.cuh
    git checkout -q cuda tests
    echo "tools/probe/.v/paged_fp8f16.cuh ready" ;;
  run)
    [[ -f tools/probe/.v/paged_fp8f16.cuh ]] || { echo "run 'prepare' here first"; exit 2; }
    t0=$(date +%s)
    WORK=/tmp/pw bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh base \
      fp8f16@tools/probe/.v/paged_fp8f16.cuh 's3=s/constexpr int kStages = 2;/constexpr int kStages = 3;/' \
      base fp8f16 2>&1 | grep -v "^$"
    echo "== split sweep (main)"
    PAGED_SPLIT_SWEEP=1 PROBE_STAGE=run WORK=/tmp/pw bash tools/probe/probe.sh paged \
      cuda/paged_attention/paged_mma.cuh base 2>&1 | grep -v "^$"
    echo "== ragged lengths (the float64 check on partial tiles)"
    PAGED_RAGGED=1 PROBE_STAGE=run WORK=/tmp/pw bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh \
      fp8f16 2>&1 | grep -v "^$"
    python3 $pending/torch_decode.py "32 8192 32 8 128" "64 8192 32 8 128" "4 32768 32 8 128" "64 2048 16 4 64"
    echo "total $(( $(date +%s) - t0 )) s" ;;
  *) sed -n '2,9p' "$0"; exit 2 ;;
esac
