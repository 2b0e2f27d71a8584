#!/usr/bin/env bash
# Compile-time variants of the RoPE kernel timed without the package build (about a minute on the
# 16-core device): each variant is cuda/rope/rope.cu with its register cap (__launch_bounds__'s
# minimum blocks per SM) and tokens in flight rewritten, linked into rope_probe.cu's harness.
#   bash tools/rope_probe/probe_rope.sh                 # the default variants below
#   bash tools/rope_probe/probe_rope.sh 2:4 3:2         # blocks:tokens pairs
#   SHAPES="8192,32,8,128 16384,16,4,64" bash ...        # tokens,q heads,kv heads,head dim per run
# Prints ptxas's registers / spills of the bf16 wide neox kernel and the harness's lines per variant.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
WORK="${WORK:-/tmp/rope_probe}"
mkdir -p "$WORK"
variants=("$@")
(( ${#variants[@]} )) || variants=(3:2 2:4 3:1 2:2)
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
flags=(-O3 -std=c++17 -gencode arch=compute_90,code=sm_90 --expt-relaxed-constexpr --diag-suppress=177,186
       -Icpp/include -Icuda -Icpp/src -Itools)
for v in "${variants[@]}"; do
  blocks=${v%%:*} tokens=${v##*:}
  sed -e "s/constexpr int kMinBlocksPerSm = [0-9]*;/constexpr int kMinBlocksPerSm = $blocks;/" \
      -e "s/constexpr int kTokensInFlight = [0-9]*;/constexpr int kTokensInFlight = $tokens;/" \
      cuda/rope/rope.cu > "$WORK/rope_$v.cu"
  grep -q "kMinBlocksPerSm = $blocks;" "$WORK/rope_$v.cu" && grep -q "kTokensInFlight = $tokens;" "$WORK/rope_$v.cu" ||
    { echo "rope.cu's constants moved"; exit 1; }
  ( "$NVCC" "${flags[@]}" -Xptxas -v -c "$WORK/rope_$v.cu" -o "$WORK/rope_$v.o" > "$WORK/ptxas_$v.log" 2>&1 &&
    "$NVCC" "${flags[@]}" "$WORK/rope_$v.o" tools/rope_probe/rope_probe.cu cpp/src/dtype.cpp -o "$WORK/probe_$v" \
      >> "$WORK/ptxas_$v.log" 2>&1 ) &
done
wait
for v in "${variants[@]}"; do
  regs=$(grep -A2 "rope_kernelI13__nv_bfloat16Lb1ELb0E" "$WORK/ptxas_$v.log" | grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores" | tr '\n' ' ')
  echo "== blocks:tokens $v ($regs)"
  [[ -x "$WORK/probe_$v" ]] || { tail -5 "$WORK/ptxas_$v.log"; continue; }
  for shape in ${SHAPES:-8192,32,8,128}; do "$WORK/probe_$v" ${shape//,/ } || echo "probe $v $shape failed"; done
done
