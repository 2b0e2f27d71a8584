#!/usr/bin/env bash
# Session 53's device questions (README.md beside this file), one call of about 300 s:
#   bash tools/probe/pending/session53.sh prepare     # here, on a clean checkout: the variant header in .v
#   bash tools/probe/pending/session53.sh run         # on the device (the `run` tool)
#   rm -rf tools/probe/.v                             # here, afterwards (and land the patch if it won)
# paged_early_table.patch: without a left window, the first tiles' block-table entries are read beside
# the sequence length instead of after it (the first copies wait for two dependent reads, not three).
# Session 53's length sweep put ours 4 us of fixed cost per launch above torch (19.9 vs 15.9 us).
# paged_warp_pipe.patch (early table included): in decode each warp streams its own keys of every tile
# (looks their pages up, copies their rows, waits on its own copies), so the tile loop has __syncwarp
# where it had two __syncthreads; WIDE prefill blocks keep block barriers. fp8 d128 t128 spills 4 bytes.
# paged_fp8_q_in_place.patch (early table included): kQF16's Q goes out with cp.async like any Q (a group
# of its own) and is converted to f16 in shared memory while the first tiles are in flight, instead of two
# global passes before the pages are looked up; so d64 takes f16 math too (it lost 4% with the old pass).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
pending=tools/probe/pending
probe() { WORK=/tmp/pw bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh "$@" 2>&1 | grep -v "^$"; }
case ${1:-} in
  prepare)
    git diff --quiet -- cuda tests || { echo "cuda/ tests/ have changes: start clean"; exit 2; }
    mkdir -p tools/probe/.v
    for v in early_table warp_pipe fp8_q_in_place; do
      git apply $pending/paged_$v.patch || exit 1
      cp cuda/paged_attention/paged_mma.cuh tools/probe/.v/paged_$v.cuh
      git checkout -q cuda tests
    done
    echo "tools/probe/.v/paged_{early_table,warp_pipe,fp8_q_in_place}.cuh ready" ;;
  run)
    [[ -f tools/probe/.v/paged_fp8_q_in_place.cuh ]] || { echo "run 'prepare' here first"; exit 2; }
    t0=$(date +%s)
    # each timed twice (a repeated name runs again)
    probe base early@tools/probe/.v/paged_early_table.cuh warp@tools/probe/.v/paged_warp_pipe.cuh \
      qin@tools/probe/.v/paged_fp8_q_in_place.cuh base early warp qin
    echo "== length sweep"
    PAGED_LENGTH_SWEEP=1 PROBE_STAGE=run probe base early warp base early warp
    echo "== split sweep: with less fixed cost per block, more splits may pay (b128 ctx1024 s3: 2.6 -> 7.8 waves)"
    PAGED_SPLIT_SWEEP=1 PROBE_STAGE=run probe early warp
    echo "== ragged lengths (the float64 check on partial tiles)"
    PAGED_RAGGED=1 PROBE_STAGE=run probe early warp qin
    python3 $pending/torch_decode.py "32 1024 32 8 128" "32 2048 32 8 128" "32 8192 32 8 128" "128 1024 32 8 128"
    echo "total $(( $(date +%s) - t0 )) s" ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac
