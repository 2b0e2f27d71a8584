#!/usr/bin/env bash
# The CUDA 12 wheel (distribution baracuda-cu12, tools/wheel_variant.py) built on this machine with the
# CUDA 12.4 toolkit of tools/cuda12_toolkit.sh, for one CPython >= 3.12 (the wheel is cp312-abi3):
# what session 40 carried to the lent GPU (CUDA 13 driver) to run the GPU tests on a CUDA 12 build.
#   PYTHON312=/path/to/python3.12 bash tools/cuda12_wheel.sh [OUT_DIR]     # default OUT_DIR: dist/
# Env: BARACUDA_CUDA_ARCHS (default 90-real: one architecture keeps it near 50 MB and ~12 minutes on
# 2 cores), CUDA12_HOME (default /tmp/cuda-12.4), HEADERS (default /tmp/baracuda-headers).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/dist}")"
PY="${PYTHON312:-$(command -v python3.12 || echo "$HOME/.pyenv/versions/3.12.1/bin/python3.12")}"
[[ -x $PY ]] || { echo "no Python 3.12 at '$PY' (set PYTHON312)" >&2; exit 2; }
VENV="${VENV:-/tmp/baracuda-cu12-venv}"
[[ -x $VENV/bin/python ]] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q scikit-build-core nanobind==3.1.0 "nvidia-cublas-cu12>=12.4,<13" cmake ninja
SRC="$(mktemp -d)"
trap 'rm -rf "$SRC"' EXIT
git -C "$ROOT" archive HEAD | tar -x -C "$SRC"
cd "$SRC"
"$VENV/bin/python" tools/wheel_variant.py --cuda 12
eval "$(PYTHON="$VENV/bin/python" bash tools/cuda12_toolkit.sh "${CUDA12_HOME:-/tmp/cuda-12.4}")"
eval "$(bash tools/fetch_headers.sh "${HEADERS:-/tmp/baracuda-headers}")"
export CUDNN_INCLUDE_DIR CUDNN_FRONTEND_INCLUDE_DIR CUTLASS_INCLUDE_DIR
export PATH="$VENV/bin:$PATH" BARACUDA_CUDA_ARCHS="${BARACUDA_CUDA_ARCHS:-90-real}"
python -m pip wheel -q --no-build-isolation --no-deps . -w "$OUT"
ls -la "$OUT"/baracuda_cu12-*.whl
