#!/usr/bin/env bash
# Kernel variants timed without the package build (a device call of a minute or two): a harness
# (tools/probe/<harness>.cu) is compiled against copies of one source file with sed expressions
# applied, one build per variant in parallel, then each is run.
#   bash tools/probe/probe.sh HARNESS FILE [NAME=SED_EXPRESSION | NAME@PATH | NAME]...
#     HARNESS  rope | paged | embedding | attention | attention_mma | attention_bwd | attention_bwd_sm90 |
#              fp8_decode (tools/probe/HARNESS.cu)
#     FILE     the file the variants rewrite, under cuda/ (a header the harness includes, or a .cu
#              compiled with it), e.g. cuda/rope/rope.cu, cuda/paged_attention/paged_mma.cuh
#     NAME     without "=": the file as it is (the baseline); a NAME given before runs again, unbuilt
#     NAME@PATH  the file at PATH in its place, PATH in the working tree (untracked files travel to
#              the device), e.g. the version at another commit: git show REV:FILE > tools/probe/.old.cu
#   PROBE_ARGS="..." runs the harness once per ';'-separated argument list (e.g. shapes); each run
#   is stopped after PROBE_TIMEOUT seconds (default 120: a variant that hangs costs no more).
#   PROBE_STAGE=build only builds (several harnesses can build at once, each with its own WORK),
#   PROBE_STAGE=run only runs what a build stage left in WORK; unset, both.
# e.g.
#   bash tools/probe/probe.sh rope cuda/rope/rope.cu base \
#     'b2t4=s/kMinBlocksPerSm = 3;/kMinBlocksPerSm = 2;/; s/kTokensInFlight = 2;/kTokensInFlight = 4;/'
# Prints, per variant, ptxas's registers and spill stores of each kernel the harness instantiates,
# then the harness's lines (each harness prints a checksum of what it wrote: variants that keep the
# math agree bit for bit).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
(( $# >= 3 )) || { sed -n '2,16p' "$0"; exit 2; }
harness=$1 file=$2
shift 2
[[ -f tools/probe/$harness.cu && -f $file && $file == cuda/* ]] || { echo "no tools/probe/$harness.cu or $file (under cuda/)"; exit 2; }
WORK="${WORK:-/tmp/probe}/$harness"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
FILT="$(dirname "$NVCC")/cu++filt"
[[ -x $FILT ]] || FILT="$(command -v c++filt || echo cat)"
rel=${file#cuda/}
# Per harness: what it links besides itself (the varied file replaces its original there), the
# kernels whose registers are listed, and extra compiler flags (the architecture, headers).
flags=(-gencode arch=compute_90,code=sm_90)
case $harness in
  rope) extra=(cpp/src/dtype.cpp cuda/rope/rope.cu) kernels=rope_kernel ;;
  attention | attention_bwd_sm90)
    # wgmma needs sm_90a; CuTe's headers from the nvidia-cutlass wheel (installed from the carried
    # .whl/ when the Python has none).
    inc=$(python3 -c 'import cutlass_library, os; print(os.path.dirname(cutlass_library.__file__) + "/source/include")' \
          2>/dev/null) || { python3 -m pip install -q --no-index --no-deps .whl/nvidia_cutlass-*.whl >&2 &&
          inc=$(python3 -c 'import cutlass_library, os; print(os.path.dirname(cutlass_library.__file__) + "/source/include")'); }
    [[ -n $inc && -d $inc/cute ]] || { echo "$harness: no CuTe headers (carry .whl/ with the nvidia-cutlass wheel)"; exit 2; }
    flags=(-gencode arch=compute_90a,code=sm_90a -DBARACUDA_HAVE_CUTLASS=1 -I"$inc")
    if [[ $harness == attention ]]; then
      # flash_sm90.cu holds the backward entry points too, so the backward units link with it
      extra=(cuda/fa2/flash_sm90.cu cuda/fa2/flash_fwd_bf16_sm90.cu cuda/fa2/flash_fwd_f16_sm90.cu
             cuda/fa2/flash_bwd_bf16_sm90.cu cuda/fa2/flash_bwd_f16_sm90.cu) kernels=flash_fwd_sm90
    else
      extra=() kernels=flash_bwd
    fi ;;
  paged) extra=() kernels=paged_mma_kernel ;;
  attention_mma) extra=() kernels=flash_fwd_kernel ;;
  fp8_decode) extra=() kernels=decode_both ;;
  attention_bwd) extra=() kernels=flash_bwd ;;
  embedding) extra=(cpp/src/dtype.cpp cuda/embedding/embedding.cu cuda/embedding/embedding_sort.cu cuda/common/radix_sort.cu)
             kernels=gather_kernel ;;
  *) extra=() kernels=. ;;
esac
stage=${PROBE_STAGE:-all}
[[ $stage == all || $stage == build || $stage == run ]] || { echo "PROBE_STAGE: build, run or unset, not $stage"; exit 2; }
names=() built=()  # every name given, in order; each distinct one once (what the build stage builds)
declare -A given=()
for v in "$@"; do
  whole=0  # NAME@PATH: another version of the whole file
  [[ $v != *=* && $v == *@* ]] && whole=1
  if ((whole)); then name=${v%%@*}; else name=${v%%=*}; fi
  names+=("$name")
  dir="$WORK/$name"
  # a name given again runs that variant again (noise), without rebuilding it as the baseline
  [[ $stage == run || -n ${given[$name]:-} ]] && continue
  given[$name]=1
  built+=("$name")
  mkdir -p "$dir/$(dirname "$rel")"
  if ((whole)); then
    [[ -f ${v#*@} ]] || { echo "variant $name: no file ${v#*@}"; exit 2; }
    cp "${v#*@}" "$dir/$rel"
  elif [[ $v == *=* ]]; then
    sed -e "${v#*=}" "$file" > "$dir/$rel"
    cmp -s "$file" "$dir/$rel" && { echo "variant $name changes nothing in $file: ${v#*=}"; exit 1; }
  else
    cp "$file" "$dir/$rel"
  fi
  srcs=(tools/probe/"$harness".cu cpp/src/smem_opt_in.cpp)  # the one kernel-launch helper defined out of line
  for f in "${extra[@]}"; do [[ $f == "$file" ]] && srcs+=("$dir/$rel") || srcs+=("$f"); done
  [[ $rel == *.cu && " ${extra[*]} " != *" $file "* ]] && srcs+=("$dir/$rel")
  ( "$NVCC" -O3 -std=c++17 "${flags[@]}" --expt-relaxed-constexpr --diag-suppress=177,186 \
      -I"$dir" -Icpp/include -Icuda -Icpp/src -Itools/probe -Xptxas -v "${srcs[@]}" -o "$dir/probe" \
      > "$dir/build.log" 2>&1 || echo "variant $name: build failed (see $dir/build.log)" ) &
done
wait
for name in "${built[@]}"; do
  dir="$WORK/$name"
  echo "== $name"
  # one line per kernel: its name, then registers and spill stores
  awk '/Compiling entry function/ { match($0, /_Z[A-Za-z0-9_]+/); k = substr($0, RSTART, RLENGTH); s = "0 bytes spill stores" }
       k != "" && /spill stores/ { match($0, /[0-9]+ bytes spill stores/); s = substr($0, RSTART, RLENGTH) }
       k != "" && /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print k " " substr($0, RSTART, RLENGTH) ", " s; k = "" }' \
      "$dir/build.log" | "$FILT" | sed -E 's/\(anonymous namespace\):://g; s/baracuda::[a-z_]*:://g; s/baracuda:://g; s/\([A-Za-z:, ]*\) Used/ Used/; s/^/   /' | grep -E "$kernels" || true
  [[ -x $dir/probe ]] || { grep -m5 error "$dir/build.log" || true; continue; }
done
[[ $stage == build ]] && exit 0
for name in "${names[@]}"; do
  dir="$WORK/$name"
  echo "== $name (runs)"
  [[ -x $dir/probe ]] || { echo "variant $name: not built"; continue; }
  IFS=';' read -ra runs <<< "${PROBE_ARGS:-}"
  (( ${#runs[@]} )) || runs=("")
  for args in "${runs[@]}"; do
    # shellcheck disable=SC2086
    timeout "${PROBE_TIMEOUT:-120}" "$dir/probe" $args || echo "variant $name ($args): run failed or hung (PROBE_TIMEOUT)"
  done
done
