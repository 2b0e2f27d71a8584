// Merge of two attention states (paged_attention_launch.h, MergeArgs): a warp per (row, head), the
// two weights from the rows' lse once, then the head dim in coalesced steps of 32 elements.
#include <cuda_runtime.h>

#include <cmath>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "paged_attention/paged_attention_launch.h"

namespace baracuda::paged_attention {
namespace {

constexpr int kWarpsPerBlock = 4;

// Operand k's element offset of row r (leading dims, then the head).
__device__ __forceinline__ int64_t row_offset(const MergeArgs& a, int k, int64_t r) {
  const int64_t h = r % a.heads;
  int64_t rest = r / a.heads, off = h * a.stride[k][kMergeMaxLead];
#pragma unroll
  for (int i = kMergeMaxLead - 1; i >= 0; --i) {
    off += (rest % a.lead[i]) * a.stride[k][i];
    rest /= a.lead[i];
  }
  return off;
}

template <class T> __global__ void __launch_bounds__(32 * kWarpsPerBlock) merge_kernel(const MergeArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= a.rows) return;
  const float la = a.lse_a[row_offset(a, 3, r)], lb = a.lse_b[row_offset(a, 4, r)];
  const float m = fmaxf(la, lb);
  const bool empty = m == -INFINITY;  // no key on either side (a NaN lse comes back through den)
  const float wa = empty ? 0.f : expf(la - m), wb = empty ? 0.f : expf(lb - m);
  const float den = wa + wb, inv = empty ? 0.f : 1.f / den;
  const T* oa = static_cast<const T*>(a.out_a) + row_offset(a, 0, r);
  const T* ob = static_cast<const T*>(a.out_b) + row_offset(a, 1, r);
  T* o = static_cast<T*>(a.out) + row_offset(a, 2, r);
  for (int d = lane; d < a.d; d += 32) {
    // A side of weight 0 is not read into the sum (its out may be anything, e.g. NaN, for an empty set).
    const float va = wa > 0.f ? wa * kernels::to_compute(oa[d]) : 0.f;
    const float vb = wb > 0.f ? wb * kernels::to_compute(ob[d]) : 0.f;
    o[d] = kernels::from_compute<T>((va + vb) * inv);
  }
  __syncwarp();  // every lane has read the row's lse before an in-place lse is written
  if (lane == 0 && a.lse) a.lse[row_offset(a, 5, r)] = empty ? -INFINITY : m + logf(den);
}

}  // namespace

void merge_states(const MergeArgs& a, void* stream) {
  if (a.rows == 0) return;
  const unsigned grid = unsigned((a.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (a.dtype) {
    case DType::Float32: merge_kernel<float><<<grid, 32 * kWarpsPerBlock, 0, s>>>(a); break;
    case DType::Float16: merge_kernel<kernels::f16><<<grid, 32 * kWarpsPerBlock, 0, s>>>(a); break;
    default: merge_kernel<kernels::bf16><<<grid, 32 * kWarpsPerBlock, 0, s>>>(a); break;
  }
  check_launch("paged_attention merge_states");
}

}  // namespace baracuda::paged_attention
