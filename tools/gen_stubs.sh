#!/usr/bin/env bash
# Regenerate the type stubs of the compiled module baracuda._C with nanobind's stubgen,
# from the *installed* package (build and install first: pip install .).
#   stubs/baracuda/_C.pyi      the reviewed copy; tests/test_stubs.py fails when it drifts
#   (CMake installs that file into the wheel next to _C.*.so)
#   python/baracuda/py.typed   PEP 561 marker, so type checkers read the inline stubs
# stubgen output differs between nanobind versions; use the pinned one (pyproject.toml).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python}"
want="3.1.0"
have="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("nanobind"))')"
if [ "$have" != "$want" ]; then
  echo "gen_stubs.sh: nanobind $have is installed, the stubs are generated with $want" >&2
  exit 1
fi
# Run outside the checkout so `import baracuda` finds the installed package.
cd "$(mktemp -d)"
"$PYTHON" -m nanobind.stubgen -q -m baracuda._C -o "$root/stubs/baracuda/_C.pyi"
: > "$root/python/baracuda/py.typed"
echo "wrote stubs/baracuda/_C.pyi and python/baracuda/py.typed"
