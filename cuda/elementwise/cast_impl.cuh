// Cast launcher: one instantiation per (input, output) dtype pair, split by input dtype
// across cast_*.cu so the 169 pairs compile in parallel; the 19 pairs that only move bits share four.
#pragma once
#include "elementwise/launchers.h"
#include "elementwise/launch.cuh"
#include "elementwise/misc_ops.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

// The casts that only move bits: a dtype to itself, int8 <-> uint8, int32 <-> uint32 (two's complement
// wraps, as torch), bool to a byte integer (0 / 1). They share one copy per width (copy_bits_launch,
// compiled in cast_from_u8.cu), not one kernel set per pair.
template <class Tin, class Tout>
constexpr bool kBitCopy = std::is_same_v<Tin, Tout> ||
                          (std::is_integral_v<Tin> && is_int_v<Tout> && sizeof(Tin) == sizeof(Tout));

template <class B> struct CopyBitsFn {
  template <int N> __device__ __forceinline__ void map(B (&y)[N], const B (&x)[N]) const {
#pragma unroll
    for (int i = 0; i < N; ++i) y[i] = x[i];
  }
};

template <class B> void copy_bits_launch(const elementwise::EwLaunch& L, void* s) {
  launch_map<B, B>(CopyBitsFn<B>{}, L, s, "ew_cast");
}

template <class Tin> void cast_launch(const elementwise::EwLaunch& L, void* s) {
  const bool saturate = L.p[0] != 0.0;
  dispatch_dtype(L.out_dtype, [&](auto tag) {
    using Tout = typename decltype(tag)::type;
    if constexpr (kBitCopy<Tin, Tout>) copy_bits_launch<bits_t<Tin>>(L, s);
    else launch_map<Tout, Tin>(CastFn<Tin, Tout>{saturate}, L, s, "ew_cast");
  });
}

extern template void copy_bits_launch<uint8_t>(const elementwise::EwLaunch&, void*);
extern template void copy_bits_launch<uint16_t>(const elementwise::EwLaunch&, void*);
extern template void copy_bits_launch<uint32_t>(const elementwise::EwLaunch&, void*);
extern template void copy_bits_launch<uint64_t>(const elementwise::EwLaunch&, void*);

}  // namespace baracuda::elementwise::kern
