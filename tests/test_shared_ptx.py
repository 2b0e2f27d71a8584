"""The shared-PTX build's guards (cmake/shared_ptx.cmake): every pattern of cmake/per_arch_units.cmake
names files of this tree, and every header whose device code takes a different path on sm_90 (or
sm_89) than on sm_80 includes common/per_arch.cuh, so that a shared unit including it fails to compile
instead of running sm_80's path on sm_90. No GPU, no build."""
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Arch guards whose threshold lies above sm_80, the lowest architecture shared PTX allows.
ABOVE_80 = re.compile(r"__CUDA_ARCH__\s*(>=\s*(8[1-9]\d|9\d\d)|<\s*(8[2-9]\d|9\d\d))")
# Guarded otherwise: dtype_traits' fp8 paths static_assert in shared units, per_arch.cuh is the guard, and the
# sm_90a units build in their own library.
EXEMPT = {"cuda/common/dtype_traits.cuh", "cuda/common/per_arch.cuh"}


def test_per_arch_patterns_name_files_of_this_tree():
    text = open(os.path.join(ROOT, "cmake", "per_arch_units.cmake")).read()
    patterns = re.findall(r"^\s+(cuda/\S+)", text, re.M)
    assert len(patterns) >= 5, patterns
    for p in patterns:
        assert glob.glob(os.path.join(ROOT, p)), f"cmake/per_arch_units.cmake: {p} matches no file"


def test_headers_with_sm90_paths_include_the_guard():
    found = []
    for path in glob.glob(os.path.join(ROOT, "cuda", "*", "*")):
        rel = os.path.relpath(path, ROOT)
        if rel in EXEMPT or rel.endswith("_sm90.cu") or not rel.endswith((".cuh", ".cu", ".h")):
            continue
        text = open(path).read()
        if ABOVE_80.search(text):
            found.append(rel)
            assert '#include "common/per_arch.cuh"' in text, f"{rel} has an sm_89+ / sm_90 path: include per_arch.cuh"
    assert "cuda/common/pdl.cuh" in found and "cuda/norm/fwd_cluster.cuh" in found, found
