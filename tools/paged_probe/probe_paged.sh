#!/usr/bin/env bash
# Variants of the paged tensor-core kernel (cuda/paged_attention/paged_mma.cuh) timed without the
# package build: each variant is the header with sed expressions applied, compiled with
# paged_probe.cu's harness (the bench's decode rows over bf16 and fp8 caches) and run.
#   bash tools/paged_probe/probe_paged.sh                       # the header as it is
#   bash tools/paged_probe/probe_paged.sh base \
#     's3=s/constexpr int kStages = 2;/constexpr int kStages = 3;/'   # NAME=SED_EXPRESSION pairs
# Prints ptxas's registers / spills of each variant's kernels, then the harness's lines.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
WORK="${WORK:-/tmp/paged_probe}"
mkdir -p "$WORK"
variants=("$@")
(( ${#variants[@]} )) || variants=(base)
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
names=()
for v in "${variants[@]}"; do
  name=${v%%=*}
  names+=("$name")
  mkdir -p "$WORK/$name/paged_attention"
  if [[ "$v" == *=* ]]; then
    sed -e "${v#*=}" cuda/paged_attention/paged_mma.cuh > "$WORK/$name/paged_attention/paged_mma.cuh"
    cmp -s cuda/paged_attention/paged_mma.cuh "$WORK/$name/paged_attention/paged_mma.cuh" &&
      { echo "variant $name changes nothing: ${v#*=}"; exit 1; }
  else
    cp cuda/paged_attention/paged_mma.cuh "$WORK/$name/paged_attention/"
  fi
  ( "$NVCC" -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 --expt-relaxed-constexpr --diag-suppress=177,186 \
      -I"$WORK/$name" -Icpp/include -Icuda -Icpp/src -Itools -Xptxas -v tools/paged_probe/paged_probe.cu -o "$WORK/$name/probe" \
      > "$WORK/$name/build.log" 2>&1 || echo "variant $name: build failed" ) &
done
wait
for name in "${names[@]}"; do
  echo "== $name"
  # one line per paged kernel: cache type, head dim, stages, tile; spill stores and registers
  awk '/Compiling entry function/ { k = ($0 ~ /paged_mma_kernel/) ? $0 : ""; s = "" }
       k != "" && /spill stores/ { match($0, /[0-9]+ bytes spill stores/); s = substr($0, RSTART, RLENGTH) }
       k != "" && /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print k "|" s ", " substr($0, RSTART, RLENGTH); k = "" }' \
      "$WORK/$name/build.log" |
    sed -E "s/.*paged_mma_kernelI13__nv_bfloat16(13__nv_fp8_e4m3|S3_)Li([0-9]+)ELi([0-9]+)ELb([01])ELi([0-9]+)E[^|]*[|]/   \1 d\2 stages \3 wide \4 tile \5: /; s/   S3_/   bf16 cache/; s/   13__nv_fp8_e4m3/   fp8 cache/"
  [[ -x "$WORK/$name/probe" ]] || { grep -m5 error "$WORK/$name/build.log"; continue; }
  "$WORK/$name/probe" || echo "variant $name: run failed"
done
