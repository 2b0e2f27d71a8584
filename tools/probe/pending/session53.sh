#!/usr/bin/env bash
# Session 53's device question (README.md beside this file), one call of about 180 s:
#   bash tools/probe/pending/session53.sh prepare     # here, on a clean checkout: the variant header in .v
#   bash tools/probe/pending/session53.sh run         # on the device (the `run` tool)
#   rm -rf tools/probe/.v                             # here, afterwards (and land the patch if it won)
# paged_early_table.patch: without a left window, the first tiles' block-table entries are read beside
# the sequence length instead of after it (the first copies wait for two dependent reads, not three).
# Session 53's length sweep put ours 4 us of fixed cost per launch above torch (19.9 vs 15.9 us).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
pending=tools/probe/pending
probe() { WORK=/tmp/pw bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh "$@" 2>&1 | grep -v "^$"; }
case ${1:-} in
  prepare)
    git diff --quiet -- cuda || { echo "cuda/ has changes: start clean"; exit 2; }
    git apply $pending/paged_early_table.patch || exit 1
    mkdir -p tools/probe/.v
    cp cuda/paged_attention/paged_mma.cuh tools/probe/.v/paged_early_table.cuh
    git checkout -q cuda
    echo "tools/probe/.v/paged_early_table.cuh ready" ;;
  run)
    [[ -f tools/probe/.v/paged_early_table.cuh ]] || { echo "run 'prepare' here first"; exit 2; }
    t0=$(date +%s)
    probe base early@tools/probe/.v/paged_early_table.cuh base early  # each timed twice (names repeat)
    echo "== length sweep"
    PAGED_LENGTH_SWEEP=1 PROBE_STAGE=run probe base early base early
    echo "== split sweep (early): with less fixed cost per block, more splits may pay (b128 ctx1024 s3: 2.6 -> 7.8 waves)"
    PAGED_SPLIT_SWEEP=1 PROBE_STAGE=run probe early
    echo "== ragged lengths (the float64 check on partial tiles)"
    PAGED_RAGGED=1 PROBE_STAGE=run probe early
    python3 $pending/torch_decode.py "32 1024 32 8 128" "32 2048 32 8 128" "32 8192 32 8 128" "128 1024 32 8 128"
    echo "total $(( $(date +%s) - t0 )) s" ;;
  *) sed -n '2,8p' "$0"; exit 2 ;;
esac
