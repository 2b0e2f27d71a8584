// Cross-entropy kernels (large vocabularies), templated on the logits type T.
//
//   ce_totals   one block: sum_i w[t_i] over non-ignored rows (the mean's denominator) and
//               sum_c w_c (the label-smoothing term's weight); fixed order.
//   ce_partial  grid (rows, chunks): online (max, sum exp) and sum w_c * x_c of one column
//               chunk, 16-byte loads, to the workspace.
//   ce_rows     a thread per row: combines its chunks in order -> lse, per-row loss.
//   ce_reduce   one block: sum of the per-row losses (fixed order) -> mean / sum.
//   ce_grad     grid (rows, chunks): the gradient from lse, in the logits dtype.
//
// A target outside [0, V) that is not ignore_index cannot be seen by select(): its row's loss,
// weight and gradient are NaN (so a mean or sum is NaN), nothing is read out of bounds.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "loss/loss_launch.h"
#include "softmax/softmax_kernels.cuh"

namespace baracuda::loss::detail {
using namespace baracuda::kernels;
using softmax::detail::block_combine;
using softmax::detail::block_sum;
using softmax::detail::combine;
using softmax::detail::load_chunk;
using softmax::detail::ninf;
using softmax::detail::store_chunk;
using softmax::detail::xexp;
using softmax::detail::xlog;

template <class T> using acc_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

template <class T> struct CeParams {
  using A = acc_of<T>;
  const T* x;
  const void* target;
  bool t64;
  const T* weight;
  const T* grad_loss;
  T* out;
  A* lse;
  T* grad;
  int64_t n, v, x_stride, gx_stride, out_stride, target_stride, lse_stride, gl_stride, w_stride;
  int64_t ignore;
  A eps;
  int reduction;
  int chunks;
  int64_t chunk_len;
  A* scal;   // [0] sum of target weights, [1] sum of all class weights
  A* part;   // [3][n * chunks]: max, sum exp, sum w*x
  A* rloss;  // [n]
  A* rw;     // [n]
};

template <class P> __device__ __forceinline__ int64_t target_of(const P& p, int64_t i) {
  return p.t64 ? static_cast<const int64_t*>(p.target)[i * p.target_stride]
               : int64_t(static_cast<const int32_t*>(p.target)[i * p.target_stride]);
}
template <class T, class A> __device__ __forceinline__ A weight_of(const CeParams<T>& p, int64_t c) {
  return p.weight ? A(to_compute(p.weight[c * p.w_stride])) : A(1);
}

template <class T>
__global__ void __launch_bounds__(1024) ce_totals(CeParams<T> p) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  A tw = 0, cw = 0;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
    const int64_t t = target_of(p, i);
    if (t == p.ignore) continue;
    tw += (t >= 0 && t < p.v) ? weight_of<T, A>(p, t) : std::numeric_limits<A>::quiet_NaN();
  }
  if (p.weight)
    for (int64_t c = threadIdx.x; c < p.v; c += blockDim.x) cw += weight_of<T, A>(p, c);
  tw = block_sum(tw, sh);
  cw = block_sum(cw, sh);
  if (threadIdx.x == 0) {
    p.scal[0] = tw;
    p.scal[1] = p.weight ? cw : A(p.v);
  }
}

template <class T, int V>
__global__ void __launch_bounds__(kThreads) ce_partial(CeParams<T> p) {
  using A = acc_of<T>;
  __shared__ A shm[32], shs[32], shz[32];
  const int64_t row = blockIdx.x;
  const int c = blockIdx.y;
  const int64_t lo = int64_t(c) * p.chunk_len, hi = min(p.v, lo + p.chunk_len);
  const T* xr = p.x + row * p.x_stride;
  const bool smooth = p.eps != A(0);
  A m = ninf<A>(), s = 0, z = 0;
  for (int64_t i0 = lo + int64_t(threadIdx.x) * V; i0 < hi; i0 += int64_t(kThreads) * V * kUnroll) {
    A v[kUnroll][V];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = i0 + int64_t(u) * kThreads * V;
      load_chunk<T, V>(xr, i < hi ? i : hi, hi, v[u], ninf<A>());
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      A cm = ninf<A>();
#pragma unroll
      for (int j = 0; j < V; ++j) cm = softmax::detail::cmax(cm, v[u][j]);
      A cs = 0;
#pragma unroll
      for (int j = 0; j < V; ++j) cs += (v[u][j] == cm && cm == ninf<A>()) ? A(0) : xexp<T>(v[u][j] - cm);
      if (cm != ninf<A>() || cs != A(0)) combine<T>(m, s, cm, cs);
      if (smooth) {
        const int64_t i = i0 + int64_t(u) * kThreads * V;
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (i + j < hi) z += weight_of<T, A>(p, i + j) * v[u][j];
      }
    }
  }
  block_combine<T>(m, s, shm, shs);
  if (smooth) z = block_sum(z, shz);
  if (threadIdx.x == 0) {
    const int64_t k = row * p.chunks + c, nk = p.n * int64_t(p.chunks);
    p.part[k] = m;
    p.part[nk + k] = s;
    p.part[2 * nk + k] = z;
  }
}

template <class T>
__global__ void __launch_bounds__(256) ce_rows(CeParams<T> p) {
  using A = acc_of<T>;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  const int64_t nk = p.n * int64_t(p.chunks);
  A m = ninf<A>(), s = 0, z = 0;
  for (int c = 0; c < p.chunks; ++c) {
    const int64_t k = i * p.chunks + c;
    if (p.part[k] != ninf<A>() || p.part[nk + k] != A(0)) combine<T>(m, s, p.part[k], p.part[nk + k]);
    z += p.part[2 * nk + k];
  }
  softmax::detail::poison_inf(m, s);
  if (m == ninf<A>()) s = std::numeric_limits<A>::quiet_NaN();  // every logit -inf: NaN, as torch
  const A lse = m + xlog(s);
  const int64_t t = target_of(p, i);
  A loss = 0, w = 0;
  if (t != p.ignore) {
    if (t < 0 || t >= p.v) {
      loss = w = std::numeric_limits<A>::quiet_NaN();
    } else {
      w = weight_of<T, A>(p, t);
      const A xt = A(to_compute(p.x[i * p.x_stride + t]));
      loss = (A(1) - p.eps) * w * (lse - xt);
      if (p.eps != A(0)) loss += p.eps / A(p.v) * (p.scal[1] * lse - z);
    }
  }
  p.lse[i * p.lse_stride] = lse;
  if (p.reduction == 0) p.out[i * p.out_stride] = from_compute<T>(loss);
  else {
    p.rloss[i] = loss;
    p.rw[i] = w;
  }
}

template <class T>
__global__ void __launch_bounds__(1024) ce_reduce(CeParams<T> p) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  A s = 0;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) s += p.rloss[i];
  s = block_sum(s, sh);
  if (threadIdx.x == 0) p.out[0] = from_compute<T>(p.reduction == 1 ? s / p.scal[0] : s);
}

template <class T, int V>
__global__ void __launch_bounds__(kThreads) ce_grad(CeParams<T> p) {
  using A = acc_of<T>;
  const int64_t row = blockIdx.x;
  const int c = blockIdx.y;
  const int64_t lo = int64_t(c) * p.chunk_len, hi = min(p.v, lo + p.chunk_len);
  const T* xr = p.x + row * p.x_stride;
  T* gr = p.grad + row * p.gx_stride;
  const int64_t t = target_of(p, row);
  const bool ignored = t == p.ignore, bad = !ignored && (t < 0 || t >= p.v);
  A g = p.grad_loss ? A(to_compute(p.grad_loss[row * p.gl_stride])) : A(1);
  if (p.reduction == 1) g /= p.scal[0];
  const A wt = (ignored || bad) ? A(0) : weight_of<T, A>(p, t);
  const A lse = A(p.lse[row * p.lse_stride]);
  const A es = p.eps / A(p.v);
  const A a = (A(1) - p.eps) * wt + es * p.scal[1];
  const A hot = (A(1) - p.eps) * wt;
  const A nan = std::numeric_limits<A>::quiet_NaN();
  for (int64_t i = lo + int64_t(threadIdx.x) * V; i < hi; i += int64_t(kThreads) * V) {
    A v[V];
    load_chunk<T, V>(xr, i, hi, v, A(0));
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int64_t col = i + j;
      A d = a * xexp<T>(v[j] - lse) - (col == t ? hot : A(0));
      if (es != A(0)) d -= es * weight_of<T, A>(p, col < hi ? col : lo);
      v[j] = ignored ? A(0) : (bad ? nan : g * d);
    }
    store_chunk<T, V>(gr, i, hi, v);
  }
}

template <class T>
void ce_launch_typed(const CeLaunch& L, cudaStream_t st) {
  using A = acc_of<T>;
  CeParams<T> p;
  p.x = static_cast<const T*>(L.x);
  p.target = L.target;
  p.t64 = L.target_dtype == DType::Int64;
  p.weight = static_cast<const T*>(L.weight);
  p.grad_loss = static_cast<const T*>(L.grad_loss);
  p.out = static_cast<T*>(L.out);
  p.lse = static_cast<A*>(L.lse);
  p.grad = static_cast<T*>(L.grad);
  p.n = L.n;
  p.v = L.v;
  p.x_stride = L.x_stride;
  p.gx_stride = L.gx_stride;
  p.out_stride = L.out_stride;
  p.target_stride = L.target_stride;
  p.lse_stride = L.lse_stride;
  p.gl_stride = L.grad_loss_stride;
  p.w_stride = L.weight_stride;
  p.ignore = L.ignore_index;
  p.eps = A(L.label_smoothing);
  p.reduction = int(L.reduction);
  p.chunks = L.chunks;
  p.chunk_len = L.chunk_len;
  char* ws = static_cast<char*>(L.workspace);
  p.scal = reinterpret_cast<A*>(ws);
  const int64_t nk = L.n * int64_t(L.chunks);
  p.part = reinterpret_cast<A*>(ws + 256);
  p.rloss = p.part + 3 * nk;
  p.rw = p.rloss + L.n;

  constexpr int VV = int(16 / sizeof(T));
  const dim3 grid(unsigned(L.n), unsigned(L.chunks));
  ce_totals<T><<<1, 1024, 0, st>>>(p);
  check_launch("cross_entropy totals");
  if (L.n == 0) {  // no rows: a mean is 0 / 0 = NaN, a sum 0, as torch
    if (L.forward && L.reduction != Reduction::None) {
      ce_reduce<T><<<1, 1024, 0, st>>>(p);
      check_launch("cross_entropy reduce");
    }
    return;
  }
  if (L.forward) {
    if (L.vec) ce_partial<T, VV><<<grid, kThreads, 0, st>>>(p);
    else ce_partial<T, 1><<<grid, kThreads, 0, st>>>(p);
    check_launch("cross_entropy partial");
    ce_rows<T><<<unsigned((L.n + 255) / 256), 256, 0, st>>>(p);
    check_launch("cross_entropy rows");
    if (L.reduction != Reduction::None) {
      ce_reduce<T><<<1, 1024, 0, st>>>(p);
      check_launch("cross_entropy reduce");
    }
  }
  if (!L.forward || L.with_grad) {
    if (L.vec) ce_grad<T, VV><<<grid, kThreads, 0, st>>>(p);
    else ce_grad<T, 1><<<grid, kThreads, 0, st>>>(p);
    check_launch("cross_entropy grad");
  }
}

}  // namespace baracuda::loss::detail
