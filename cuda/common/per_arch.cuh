// Included by every header whose device code differs between the architectures a build targets
// (guards on __CUDA_ARCH__ >= 900 or < 890: clusters, PDL, mbarriers, bulk copies). Most units are
// compiled once, as the lowest architecture's PTX, into every architecture's machine code (CMake's
// shared-PTX units, which define BARACUDA_SHARED_PTX): one cicc run instead of one per architecture.
// In such a unit the sm_90 code would take the sm_80 side of those guards (an empty cluster kernel,
// no PDL wait), so including this header there is an error: list the unit in
// cmake/per_arch_units.cmake instead, which compiles it once per architecture.
#pragma once

#if defined(BARACUDA_SHARED_PTX)
#error "architecture-specific device code in a shared-PTX unit: list this unit in cmake/per_arch_units.cmake"
#endif
