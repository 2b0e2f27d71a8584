#!/usr/bin/env bash
# Fetches the headers the optional backends compile against, headers only (libcudnn is loaded at run
# time; CUTLASS is header-only): cudnn.h and the cudnn-frontend from PyPI's nvidia-cudnn-cu13 and
# nvidia-cudnn-frontend wheels, CUTLASS / CuTe from the nvidia-cutlass wheel (without its Python
# dependencies). Prints the variables the build reads. Usage:
#   eval "$(bash tools/fetch_headers.sh [DEST])"   # default DEST: .whl/headers
# For builds whose Python has none of these wheels installed (CI, the wheel builds).
set -euo pipefail
DEST="$(realpath -m "${1:-.whl/headers}")"
PY="${PYTHON:-python3}"
# cudnn.h of the cuDNN release torch 2.11 (cu13) ships; the frontend and CUTLASS our code is written against.
CUDNN_WHEEL="nvidia-cudnn-cu13==9.19.0.56"
FRONTEND_WHEEL="nvidia-cudnn-frontend==1.32.0"
CUTLASS_WHEEL="nvidia-cutlass==4.2.0.0"
if [[ ! -f "$DEST/cudnn/cudnn.h" || ! -f "$DEST/frontend/include/cudnn_frontend.h" ||
      ! -f "$DEST/cutlass/cutlass/cutlass.h" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$PY" -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "$CUDNN_WHEEL" "$FRONTEND_WHEEL" "$CUTLASS_WHEEL" >&2
  "$PY" - "$tmp" "$DEST" <<'PYEOF'
import glob, os, sys, zipfile
src, dest = sys.argv[1], sys.argv[2]
# wheel path prefix -> folder under DEST (the frontend keeps include/: its headers include "../include/..")
prefixes = {"nvidia/cudnn/include/": "cudnn", "include/": "frontend/include",
            "cutlass_library/source/include/": "cutlass"}
for wheel in glob.glob(os.path.join(src, "*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            prefix = next((p for p in prefixes if name.startswith(p)), None)
            if prefix is None or name.endswith("/"):
                continue
            out = os.path.join(dest, prefixes[prefix], name[len(prefix):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as f:
                f.write(z.read(name))
PYEOF
fi
echo "export CUDNN_INCLUDE_DIR='$DEST/cudnn' CUDNN_FRONTEND_INCLUDE_DIR='$DEST/frontend/include'" \
     "CUTLASS_INCLUDE_DIR='$DEST/cutlass'"
