#!/usr/bin/env bash
# A CUDA 12.4 toolkit for building baracuda against CUDA 12 on a machine that has none, from public
# packages only: nvcc, cicc, ptxas, cudafe++ and the headers from Debian trixie's non-free
# nvidia-cuda-toolkit / nvidia-cuda-dev (NVIDIA's binaries, repackaged), CCCL (libcu++, CUB) from
# PyPI's nvidia-cuda-cccl-cu12, laid out as a CUDA_HOME with its own nvcc.profile. No root, no apt:
# the .debs are unpacked with dpkg -x. Prints the variables a build reads. Usage:
#   eval "$(bash tools/cuda12_toolkit.sh [DEST])"     # default DEST: /tmp/cuda-12.4
#   pip install nvidia-cublas-cu12                    # the run-time libcublasLt.so.12 (torch cu12 brings it)
#   python -m pip install .                           # CUDACXX / CUDA_HOME from the eval point at 12.4
# (docs/build.md, "CUDA 12".)
set -euo pipefail
DEST="$(realpath -m "${1:-/tmp/cuda-12.4}")"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PY="${PYTHON:-python3}"
if [[ ! -x "$DEST/bin/nvcc" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  curl -fsSL "$MIRROR/dists/trixie/non-free/binary-amd64/Packages.xz" | xz -dc > "$tmp/Packages"
  for pkg in nvidia-cuda-toolkit nvidia-cuda-dev libnvvm4 libcudart12; do
    file=$(awk -v p="$pkg" 'BEGIN { RS = "" } $0 ~ "(^|\n)Package: " p "\n" { print }' "$tmp/Packages" |
           sed -n 's/^Filename: //p' | head -1)
    [[ -n $file ]] || { echo "no $pkg in Debian trixie non-free" >&2; exit 1; }
    curl -fsSL -o "$tmp/$pkg.deb" "$MIRROR/$file"
    dpkg -x "$tmp/$pkg.deb" "$tmp/root"
  done
  "$PY" -m pip download -q --no-deps --only-binary=:all: -d "$tmp/whl" "nvidia-cuda-cccl-cu12==12.4.127.post1" >&2
  "$PY" -m zipfile -e "$tmp"/whl/*.whl "$tmp/cccl"
  R="$tmp/root"
  mkdir -p "$DEST/bin" "$DEST/nvvm/bin" "$DEST/lib64"
  cp -a "$R/usr/lib/nvidia-cuda-toolkit/bin/nvcc" "$R/usr/lib/nvidia-cuda-toolkit/bin/crt" "$DEST/bin/"
  for b in ptxas cudafe++ fatbinary nvlink bin2c cuobjdump nvdisasm cu++filt nvprune; do cp -a "$R/usr/bin/$b" "$DEST/bin/"; done
  cp -a "$R/usr/lib/nvidia-cuda-toolkit/bin/cicc" "$DEST/nvvm/bin/"
  cp -a "$R/usr/lib/nvidia-cuda-toolkit/libdevice" "$DEST/nvvm/"
  cp -a "$R/usr/include" "$DEST/include"
  cp -an "$tmp/cccl/nvidia/cuda_cccl/include/." "$DEST/include/"
  rm -f "$DEST/include/__init__.py"
  cp -a "$R/usr/lib/x86_64-linux-gnu/." "$DEST/lib64/"
  # Debian's nvcc.profile points at /usr; this one at the tree it sits in.
  cat > "$DEST/bin/nvcc.profile" <<'EOF'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF
fi
"$DEST/bin/nvcc" --version | tail -1 >&2
echo "export CUDACXX='$DEST/bin/nvcc' CUDA_HOME='$DEST'"
