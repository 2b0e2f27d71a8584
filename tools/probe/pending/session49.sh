#!/usr/bin/env bash
# Session 49's three pending attention patches (README.md beside this file), timed in one device call.
#   bash tools/probe/pending/session49.sh prepare   # here, on a clean checkout: writes the base
#                                                   # variants to tools/probe/.v/, applies the patches
#   bash tools/probe/pending/session49.sh run       # on the device (the `run` tool; carry .whl):
#                                                   # builds the four harnesses at once, then times each
#   git checkout cuda tests && rm -rf tools/probe/.v  # here, afterwards (land what won instead)
# The backward: main's flash_bwd.cuh (base), the masked-tiles patch (mask), both patches (new), on
# plain causal / unmasked rows and softcap rows; torch's FA2 backward on the same rows. The forward at
# d256: the sm_90a warp-specialized tile (new) against the mma.sync m64n32 and torch's FA2.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
pending=tools/probe/pending
case ${1:-} in
  prepare)
    git diff --quiet -- cuda tests || { echo "cuda/ or tests/ has changes: start from a clean checkout"; exit 2; }
    mkdir -p tools/probe/.v
    git show HEAD:cuda/fa2/flash_bwd.cuh > tools/probe/.v/bwd_main.cuh
    git apply $pending/attention_bwd_masked_tiles32.patch
    cp cuda/fa2/flash_bwd.cuh tools/probe/.v/bwd_mask.cuh
    git apply $pending/attention_bwd_general_rule32.patch $pending/attention_fwd_sm90_d256.patch
    git status --short ;;
  run)
    [[ -f tools/probe/.v/bwd_mask.cuh ]] || { echo "run 'prepare' here first"; exit 2; }
    python3 -m pip install -q --no-index --no-deps .whl/nvidia_cutlass-*.whl
    out=${OUT:-/tmp}
    bwd=(cuda/fa2/flash_bwd.cuh base@tools/probe/.v/bwd_main.cuh mask@tools/probe/.v/bwd_mask.cuh new)
    t0=$(date +%s)
    export PROBE_STAGE=build
    bash tools/probe/probe.sh attention_bwd_sm90 "${bwd[@]}" > "$out/build_bwd_sm90.log" 2>&1 &
    bash tools/probe/probe.sh attention_bwd "${bwd[@]}" > "$out/build_bwd.log" 2>&1 &
    bash tools/probe/probe.sh attention cuda/fa2/flash_fwd_sm90.cuh new > "$out/build_fwd_sm90.log" 2>&1 &
    bash tools/probe/probe.sh attention_mma cuda/fa2/flash_fwd.cuh new > "$out/build_fwd_mma.log" 2>&1 &
    wait
    echo "built in $(( $(date +%s) - t0 )) s"
    cat "$out"/build_*.log
    export PROBE_STAGE=run
    rows='8 2048 16 16 128 1;4 4096 32 8 128 1;8 2048 32 32 64 1;32 512 16 16 128 1;8 2048 16 16 128 0'
    soft='8 2048 16 16 128 1 30;8 2048 16 16 128 0 30;8 2048 32 32 64 1 30'
    PROBE_ARGS="check;$rows;$soft" bash tools/probe/probe.sh attention_bwd_sm90 "${bwd[@]}"
    PROBE_ARGS="check;$rows;$soft" bash tools/probe/probe.sh attention_bwd "${bwd[@]}"
    d256='8 2048 8 8 256 0;8 2048 8 8 256 1;2 8192 8 8 256 0;2 8192 8 8 256 1;32 512 8 8 256 1'
    PROBE_ARGS="$(sed 's/;/ 128 64;/g; s/$/ 128 64/' <<< "$d256")" \
      bash tools/probe/probe.sh attention cuda/fa2/flash_fwd_sm90.cuh new
    PROBE_ARGS="$(sed 's/;/ 64 32;/g; s/$/ 64 32/' <<< "$d256")" \
      bash tools/probe/probe.sh attention_mma cuda/fa2/flash_fwd.cuh new
    IFS=';' read -ra fwd_cases <<< "$d256"
    IFS=';' read -ra bwd_cases <<< "$rows"
    python3 tools/probe/torch_sdpa.py "${fwd_cases[@]}"
    python3 tools/probe/torch_sdpa.py --backward "${bwd_cases[@]}"
    echo "total $(( $(date +%s) - t0 )) s" ;;
  *) sed -n '2,10p' "$0"; exit 2 ;;
esac
