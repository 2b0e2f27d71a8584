// Sum a dense f32/f64 gradient of the broadcast shape down to an operand's shape (the
// backward of broadcasting). Fixed summation order: deterministic and bit-stable.
//   rows:    one warp or block per output; lanes walk the reduced elements.
//   columns: the innermost dimension is kept; a block covers 32 adjacent outputs (coalesced)
//            and 8 slices of the reduced elements, combined in a fixed order.
#include <cuda_runtime.h>

#include <algorithm>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "elementwise/ew_launch.h"
#include "elementwise/kernels.h"
#include "elementwise/misc_ops.cuh"

namespace baracuda::kernels {
namespace {

struct ReduceGeometry {
  int nkept = 0, nred = 0;
  int64_t kept_size[kMaxRank], kept_src[kMaxRank], kept_dst[kMaxRank];  // innermost first
  int64_t red_size[kMaxRank], red_src[kMaxRank];
  int64_t K = 1, R = 1;
  __device__ __forceinline__ void output(int64_t o, int64_t& src, int64_t& dst) const {
    src = 0; dst = 0;
    for (int d = 0; d < nkept; ++d) {
      const int64_t i = o % kept_size[d];
      o /= kept_size[d];
      src += i * kept_src[d];
      dst += i * kept_dst[d];
    }
  }
  __device__ __forceinline__ int64_t reduced(int64_t r) const {
    int64_t off = 0;
    for (int d = 0; d < nred; ++d) {
      off += (r % red_size[d]) * red_src[d];
      r /= red_size[d];
    }
    return off;
  }
};

template <int THREADS, class A, class Tout>
__global__ void __launch_bounds__(256) reduce_rows_kernel(ReduceGeometry g, const A* src, Tout* dst) {
  constexpr int kPerBlock = 256 / THREADS;
  const int lane = threadIdx.x % THREADS;
  const int64_t o = int64_t(blockIdx.x) * kPerBlock + threadIdx.x / THREADS;
  __shared__ A partial[256 / 32];
  A acc = A(0);
  int64_t base = 0, doff = 0;
  if (o < g.K) {
    g.output(o, base, doff);
    for (int64_t r = lane; r < g.R; r += THREADS) acc += src[base + g.reduced(r)];
  }
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if constexpr (THREADS > 32) {
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      acc = A(0);
      for (int w = 0; w < THREADS / 32; ++w) acc += partial[w];
    }
  }
  if (lane == 0 && o < g.K) dst[doff] = convert<A, Tout>(acc, true);
}

template <class A, class Tout>
__global__ void __launch_bounds__(256) reduce_columns_kernel(ReduceGeometry g, const A* src, Tout* dst) {
  __shared__ A partial[8][33];
  const int64_t o = int64_t(blockIdx.x) * 32 + threadIdx.x;
  A acc = A(0);
  int64_t base = 0, doff = 0;
  if (o < g.K) {
    g.output(o, base, doff);
    for (int64_t r = threadIdx.y; r < g.R; r += 8) acc += src[base + g.reduced(r)];
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && o < g.K) {
    for (int s = 1; s < 8; ++s) acc += partial[s][threadIdx.x];
    dst[doff] = convert<A, Tout>(acc, true);
  }
}

}  // namespace
}  // namespace baracuda::kernels

namespace baracuda::ew {

void launch_reduce_to_shape(const ReduceLaunch& R, void* stream_) {
  using namespace kernels;
  if (R.dst_numel == 0) return;
  auto stream = static_cast<cudaStream_t>(stream_);
  ReduceGeometry g;
  // Dense source strides of the full shape, then split dims into kept / reduced, innermost first.
  int64_t src_stride[kMaxRank];
  int64_t s = 1;
  for (int d = R.rank - 1; d >= 0; --d) { src_stride[d] = s; s *= R.full[d]; }
  for (int d = R.rank - 1; d >= 0; --d) {
    if (R.reduced[d]) {
      g.red_size[g.nred] = R.full[d]; g.red_src[g.nred] = src_stride[d]; g.R *= R.full[d]; ++g.nred;
    } else {
      g.kept_size[g.nkept] = R.full[d]; g.kept_src[g.nkept] = src_stride[d];
      g.kept_dst[g.nkept] = R.dst_stride[d]; g.K *= R.full[d]; ++g.nkept;
    }
  }
  const bool columns = R.rank > 0 && !R.reduced[R.rank - 1] && R.full[R.rank - 1] >= 32;
  dispatch_dtype(R.dst_dtype, [&](auto tag) {
    using Tout = typename decltype(tag)::type;
    auto go = [&](auto acc_tag) {
      using A = typename decltype(acc_tag)::type;
      const A* src = static_cast<const A*>(R.src);
      Tout* dst = static_cast<Tout*>(R.dst);
      if (columns) {
        reduce_columns_kernel<A, Tout><<<unsigned((g.K + 31) / 32), dim3(32, 8), 0, stream>>>(g, src, dst);
      } else if (g.R >= 4096) {
        reduce_rows_kernel<256, A, Tout><<<unsigned(g.K), 256, 0, stream>>>(g, src, dst);
      } else {
        reduce_rows_kernel<32, A, Tout><<<unsigned((g.K + 7) / 8), 256, 0, stream>>>(g, src, dst);
      }
    };
    if constexpr (std::is_same_v<Tout, double>) go(TypeTag<double>{});
    else if constexpr (is_fp_v<Tout>) go(TypeTag<float>{});
    else throw Unsupported(std::string("reduce_to_shape: no kernel for ") + dtype_name(R.dst_dtype));
  });
  check_launch("reduce_to_shape");
}

}  // namespace baracuda::ew
