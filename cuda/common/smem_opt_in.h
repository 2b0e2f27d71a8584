// Dynamic shared memory past the default 48 KiB per block: one mechanism for every launch site.
#pragma once
#include <cstddef>

namespace baracuda {

// A launch whose dynamic shared memory plus the kernel's static arrays passes 48 KiB needs the kernel's
// attribute raised first, per device. One entry per kernel and device keeps the dynamic bytes allowed
// so far (at first 48 KiB less the static size, read once), so the driver is called only for more.
// Defined in cpp/src/smem_opt_in.cpp: its map and mutex stay out of the kernel units' compile time.
void opt_in_dynamic_smem(const void* kernel, size_t bytes, const char* what);
template <class F> void opt_in_dynamic_smem(F* kernel, size_t bytes, const char* what) {
  opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes, what);
}

}  // namespace baracuda
