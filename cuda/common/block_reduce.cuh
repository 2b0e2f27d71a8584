// Fixed-order sums across lanes and blocks: the same butterfly every call, so a result is the same
// bits run to run (no atomics). Every participating lane gets the result.
#pragma once
#include <cuda_runtime.h>

namespace baracuda::kernels {

// Sum over aligned groups of G lanes (G a power of two, at most 32) of a full warp.
template <int G, class C> __device__ __forceinline__ C group_sum(C v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <class C> __device__ __forceinline__ C warp_sum(C v) { return group_sum<32>(v); }

// Block-wide through 32 shared slots `sh`; blockDim.x a multiple of 32. Synchronizes the block.
template <class C> __device__ __forceinline__ C block_sum(C v, C* sh) {
  v = warp_sum(v);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
  __syncthreads();
  if (l == 0) sh[w] = v;
  __syncthreads();
  v = l < nw ? sh[l] : C(0);
  return warp_sum(v);
}

}  // namespace baracuda::kernels
