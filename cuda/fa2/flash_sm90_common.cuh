// What the sm_90a flash kernels (flash_fwd_sm90.cuh, flash_bwd_sm90.cuh) share: CuTe's element
// types, the cp.async copy of a tile into the 128-byte swizzle wgmma reads, and the two product forms
// on one warpgroup (both operands from shared memory; A from registers). Built only with CUTLASS's
// CuTe for a 90 architecture.
#pragma once
#include "attention/attention_launch.h"
#include "baracuda/errors.h"
#include "plan_util.h"

#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "common/mbarrier.cuh"

#include "common/fast_exp.cuh"
#include "fa2/flash_common.cuh"

namespace baracuda::attention::flash {
namespace {

using namespace cute;

template <class T> struct CuteType;
template <> struct CuteType<kernels::bf16> { using type = cutlass::bfloat16_t; };
template <> struct CuteType<kernels::f16> { using type = cutlass::half_t; };

// Rows [r0, r0 + ROWS) of an operand (row stride `stride`, D contiguous) into a swizzled tile seen
// as `tile` (row, col), or as (col, row) when TRANSPOSED (V as the MN-major operand); 16-byte chunks
// (eight elements stay contiguous under the 128-byte swizzle), rows at or past `n` zero-filled.
// UNROLL: copies in flight per loop step (0: all; the warp-specialized producer keeps few registers).
template <int ROWS, int D, bool TRANSPOSED, int kThreads, int UNROLL = 0, class Tile, class T>
__device__ __forceinline__ void load_swizzled(Tile& tile, const T* base, int64_t stride, int64_t r0, int64_t n) {
  constexpr int kChunks = D / 8, kTotal = ROWS * kChunks, kSteps = kTotal / kThreads;
  constexpr int kUnroll = UNROLL == 0 ? kSteps : UNROLL;
  static_assert(kTotal % kThreads == 0, "whole passes of the block");
#pragma unroll kUnroll
  for (int it = 0; it < kSteps; ++it) {
    const int c = int(threadIdx.x) + it * kThreads, r = c / kChunks, cc = c % kChunks;
    const bool in = r0 + r < n;
    const T* src = base + (in ? (r0 + r) * stride : 0) + cc * 8;
    auto* dst = raw_pointer_cast(TRANSPOSED ? &tile(cc * 8, r) : &tile(r, cc * 8));
    kernels::cp_async16_zfill(reinterpret_cast<T*>(dst), src, in);
  }
}

// S = Q K^T of one warpgroup, issued and committed (the caller waits): the first k-block
// overwrites S, the rest accumulate.
template <class Mma, class TQ, class TK, class TS>
__device__ __forceinline__ void issue_qk(Mma& mma, const TQ& tSrQ, const TK& tSrK, TS& tSrS) {
  warpgroup_fence_operand(tSrS);
  warpgroup_arrive();
  mma.accumulate_ = GMMA::ScaleOut::Zero;
#pragma unroll
  for (int kb = 0; kb < size<2>(tSrQ); ++kb) {
    cute::gemm(mma, tSrQ(_, _, kb), tSrK(_, _, kb), tSrS);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
}

// O += P V of one warpgroup (P from registers), issued and committed (the caller waits). P's 16-bit
// pairs are packed before the fence: packed after it, ptxas injects a second warpgroup.arrive
// (C7519; the grad_k / grad_v kernel, whose P^T conversion runs while another product is in flight).
template <class Mma, class TP, class TV, class TO>
__device__ __forceinline__ void issue_pv(Mma& mma, TP& tOrP, const TV& tOrV, TO& tOrO) {
  Tensor packed = recast<uint32_t>(tOrP);
  warpgroup_fence_operand(packed);
  warpgroup_fence_operand(tOrO);
  warpgroup_arrive();
#pragma unroll
  for (int kc = 0; kc < size<2>(tOrP); ++kc) cute::gemm(mma, tOrP(_, _, kc), tOrV(_, _, kc), tOrO);
  warpgroup_commit_batch();
}

// An operand (q / k / v / grad_out) as the TMA copies see it: (rows, D, heads, batch), element strides,
// D contiguous.
template <class E, int D, class T>
auto tma_rows_major(const T* ptr, int64_t rows, int64_t heads, int64_t batch, const Operand& o) {
  return make_tensor(make_gmem_ptr(reinterpret_cast<const E*>(ptr)),
                     make_layout(make_shape(int32_t(rows), Int<D>{}, int32_t(heads), int32_t(batch)),
                                 make_stride(o.row, _1{}, o.head, o.batch)));
}
// What cuTensorMapEncodeTiled takes (a refused descriptor would not fail until the kernel's loads,
// so anything else loads by cp.async): a 16-byte aligned base, strides non-zero multiples of 16
// bytes under 2^40 (a stride-0 broadcast, e.g. k / v expanded over the batch, is not one), dims
// under 2^31.
inline bool tma_operand_ok(const Operand& o, int64_t elem, int64_t rows, int64_t heads, int64_t batch) {
  auto stride_ok = [&](int64_t v) { return v > 0 && (v * elem) % 16 == 0 && v * elem < (int64_t(1) << 40); };
  const int64_t lim = (int64_t(1) << 31) - 1;
  return reinterpret_cast<uintptr_t>(o.data) % 16 == 0 && stride_ok(o.row) && stride_ok(o.head) &&
         stride_ok(o.batch) && rows <= lim && heads <= lim && batch <= lim;
}

// A C fragment of N columns (4 elements per 8-column n-tile), rounded to 16 bits, as the A operand
// of a product summing over those columns, per k-block of 16: ((2, 2, 2), 1, N / 16), element 8 kc + j
// being n-tile 2 kc + j / 4's C element j % 4 (the per-warp layout of mma.sync's fragments).
template <class E, int N> __device__ __forceinline__ auto a_fragment() {
  return make_tensor<E>(Layout<Shape<Shape<_2, _2, _2>, _1, Int<N / 16>>>{});
}

}  // namespace
}  // namespace baracuda::attention::flash
