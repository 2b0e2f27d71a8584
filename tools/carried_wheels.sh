#!/usr/bin/env bash
# Install the wheels a device call carries (git-ignored .whl/, named in the call's carry): the device
# has no network. They hold the headers the optional backends build against (nvidia-cutlass,
# nvidia-cudnn-frontend, cp312); a build without them silently leaves out the CUTLASS / CuTe kernels
# (the sm_90a flash forward among them) and cuDNN. Usage: bash tools/carried_wheels.sh [LOG]
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LOG="${1:-/dev/null}"
for w in .whl/*.whl; do
  [[ -f "$w" ]] && python3 -m pip install -q --no-index --no-deps "$w" >> "$LOG" 2>&1
done
ls .whl/*.whl > /dev/null 2>&1 || echo "carried_wheels: no .whl/ here: the build has no CUTLASS or cuDNN headers"
exit 0
