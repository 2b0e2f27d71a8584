// Device helpers of the loss family: exp / log in the compute type, online (max, sum) pairs,
// fixed-order warp and block reductions, 16-byte packs. Kept in the family (not borrowed from
// cuda/softmax) so the two families change independently.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/block_reduce.cuh"
#include "common/dtype_traits.cuh"
#include "common/fast_exp.cuh"
#include "common/online_softmax.cuh"
#include "common/packed_vec.cuh"

namespace baracuda::loss::detail {
using namespace baracuda::kernels;

template <class T> using acc_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

// exp(v - m) where ml2 = m * log2(e) was computed once: one FFMA and one MUFU for half storage.
template <class T, class C> __device__ __forceinline__ C exp_shift(C v, C m, C ml2) {
  if constexpr (is_half_v<T>) return ex2_ftz(fmaf(v, kLog2e, -ml2));
  else return xexp<T>(v - m);
}

}  // namespace baracuda::loss::detail
