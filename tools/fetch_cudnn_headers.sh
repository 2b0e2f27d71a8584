#!/usr/bin/env bash
# Fetches the headers the cuDNN backends compile against (no libraries: libcudnn is loaded at run
# time) from PyPI's nvidia-cudnn-cu13 and nvidia-cudnn-frontend wheels into DEST, and prints the
# two variables the build reads. Usage:
#   eval "$(bash tools/fetch_cudnn_headers.sh [DEST])"   # default DEST: .whl/cudnn-headers
# Only for builds whose Python has neither wheel installed (CI; a torch install brings cudnn.h).
set -euo pipefail
DEST="$(realpath -m "${1:-.whl/cudnn-headers}")"
PY="${PYTHON:-python3}"
# cudnn.h of the cuDNN release torch 2.11 (cu13) ships; the frontend our code is written against.
CUDNN_WHEEL="nvidia-cudnn-cu13==9.19.0.56"
FRONTEND_WHEEL="nvidia-cudnn-frontend==1.32.0"
if [[ ! -f "$DEST/cudnn/cudnn.h" || ! -f "$DEST/frontend/include/cudnn_frontend.h" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$PY" -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "$CUDNN_WHEEL" "$FRONTEND_WHEEL" >&2
  "$PY" - "$tmp" "$DEST" <<'PYEOF'
import glob, os, sys, zipfile
src, dest = sys.argv[1], sys.argv[2]
for wheel in glob.glob(os.path.join(src, "*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith("/"):
                continue
            if name.startswith("nvidia/cudnn/include/"):
                rel = os.path.join("cudnn", name[len("nvidia/cudnn/include/"):])
            elif name.startswith("include/"):
                rel = os.path.join("frontend", name)  # keeps include/: its headers include "../include/.."
            else:
                continue
            out = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as f:
                f.write(z.read(name))
PYEOF
fi
echo "export CUDNN_INCLUDE_DIR='$DEST/cudnn' CUDNN_FRONTEND_INCLUDE_DIR='$DEST/frontend/include'"
