// nll_loss: a two-stage reduction over rows (loss and target weight) in a fixed order, and a gradient
// that is -w[t_i] * g_i at (i, t_i) and 0 elsewhere. No float atomics.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "loss/loss_common.cuh"
#include "loss/loss_launch.h"

namespace baracuda::loss::detail {

// ---- nll_loss ------------------------------------------------------------------------------
template <class P> __device__ __forceinline__ int64_t nll_target(const P& L, int64_t i) {
  return L.target_dtype == DType::Int64 ? static_cast<const int64_t*>(L.target)[i * L.t_stride]
                                        : int64_t(static_cast<const int32_t*>(L.target)[i * L.t_stride]);
}
// The row's loss and target weight: 0, 0 when ignored; NaN, NaN for a target outside [0, C).
template <class T>
__device__ __forceinline__ void nll_row(const NllLaunch& L, int64_t i, acc_of<T>& loss, acc_of<T>& w) {
  using A = acc_of<T>;
  const int64_t t = nll_target(L, i);
  loss = w = A(0);
  if (t == L.ignore_index) return;
  if (t < 0 || t >= L.c) {
    loss = w = qnan<A>();
    return;
  }
  w = L.weight ? A(to_compute(static_cast<const T*>(L.weight)[t * L.w_stride])) : A(1);
  loss = -w * A(to_compute(static_cast<const T*>(L.x)[i * L.x_stride0 + t * L.x_stride1]));
}

// Stage 1: per block (fixed grid-stride order) the sums of loss and weight; reduction none writes
// the per-row loss instead.
template <class T>
__global__ void __launch_bounds__(kPwThreads) nll_rows(NllLaunch L, int blocks) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  const int64_t stride = int64_t(blocks) * blockDim.x;
  A sl = 0, sw = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < L.n; i += stride) {
    A l, w;
    nll_row<T>(L, i, l, w);
    if (L.reduction == Reduction::None && !L.backward) static_cast<T*>(L.out)[i * L.out_stride] = from_compute<T>(l);
    sl += l;
    sw += w;
  }
  if (L.reduction == Reduction::None && !L.backward) return;
  sl = block_sum(sl, sh);
  sw = block_sum(sw, sh);
  if (threadIdx.x == 0) {
    A* part = static_cast<A*>(L.workspace);
    part[2 + blockIdx.x] = sl;
    part[2 + blocks + blockIdx.x] = sw;
  }
}
// Stage 2: part[0] = sum of losses, part[1] = sum of weights; forward writes mean / sum.
template <class T>
__global__ void __launch_bounds__(1024) nll_finish(NllLaunch L, int blocks) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  A* part = static_cast<A*>(L.workspace);
  A sl = 0, sw = 0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) {
    sl += part[2 + i];
    sw += part[2 + blocks + i];
  }
  sl = block_sum(sl, sh);
  sw = block_sum(sw, sh);
  if (threadIdx.x == 0) {
    part[0] = sl;
    part[1] = sw;
    if (!L.backward) static_cast<T*>(L.out)[0] = from_compute<T>(L.reduction == Reduction::Mean ? sl / sw : sl);
  }
}
template <class T>
__global__ void __launch_bounds__(kPwThreads) nll_grad(NllLaunch L) {
  using A = acc_of<T>;
  T* g = static_cast<T*>(L.out);
  const T* gl = static_cast<const T*>(L.grad_loss);
  const bool per_row = L.reduction == Reduction::None;
  A gs = per_row ? A(0) : A(to_compute(gl[0]));
  if (L.reduction == Reduction::Mean) gs = gs / static_cast<const A*>(L.workspace)[1];
  const int64_t total = L.n * L.c, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t i = e / L.c, col = e - i * L.c;
    const int64_t t = nll_target(L, i);
    A v = 0;
    if (t != L.ignore_index) {
      if (t < 0 || t >= L.c) {
        v = qnan<A>();
      } else if (col == t) {
        const A w = L.weight ? A(to_compute(static_cast<const T*>(L.weight)[t * L.w_stride])) : A(1);
        v = -w * (per_row ? A(to_compute(gl[i * L.gl_stride])) : gs);
      }
    }
    g[i * L.g_stride0 + col * L.g_stride1] = from_compute<T>(v);
  }
}

template <class T>
void nll_launch_typed(const NllLaunch& L, cudaStream_t st) {
  const int blocks = int(std::max<int64_t>(1, std::min<int64_t>((L.n + kPwThreads - 1) / kPwThreads, kPwBlocks)));
  const bool need_sums = L.reduction != Reduction::None;
  if (!L.backward || need_sums) {
    if (L.n > 0 || need_sums) {
      nll_rows<T><<<unsigned(blocks), kPwThreads, 0, st>>>(L, blocks);
      check_launch("nll_loss rows");
    }
    if (need_sums) {
      nll_finish<T><<<1, 1024, 0, st>>>(L, blocks);
      check_launch("nll_loss finish");
    }
  }
  if (L.backward && L.n * L.c > 0) {
    const int64_t want = (L.n * L.c + kPwThreads - 1) / kPwThreads;
    nll_grad<T><<<unsigned(std::min<int64_t>(want, 132 * 32)), kPwThreads, 0, st>>>(L);
    check_launch("nll_loss grad");
  }
}

}  // namespace baracuda::loss::detail
