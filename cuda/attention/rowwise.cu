// The rowwise attention kernels: every dtype, head dims up to 256, every score rule; computed in
// f32 (f64 for f64) with libm's exp / log / tanh. The reference path of the family and the backend
// of what the flash kernels do not cover. One warp per query row (forward, grad_q) or key row
// (grad_k, grad_v): lanes take 32 keys (queries) at a time for the dot products, then the head dim
// for the weighted sums, so every gradient element is summed by one warp in a fixed order.
#include <cuda_runtime.h>

#include "attention/attention_common.cuh"
#include "common/block_reduce.cuh"
#include "common/compute_math.cuh"
#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/online_softmax.cuh"

namespace baracuda::attention {
namespace {

using kernels::compute_t;
using kernels::from_compute;
using kernels::to_compute;

constexpr int kWarps = 4;
constexpr int kPerLane = int(kRowwiseMaxHeadDim / 32);

namespace cmath = kernels::cmath;  // libm's exp / tanh in the compute type (f32 or f64)

// The score of one (query, key) pair from its dot product, and d score / d dot (the backward).
template <class C> struct ScoreRule {
  C scale, softcap, slope;
  __device__ ScoreRule(const Geometry& g, const Pointers& p, int64_t b, int64_t h) {
    scale = C(g.scale);
    softcap = C(g.softcap);
    slope = g.alibi ? C(static_cast<const float*>(p.alibi_slopes)[b * g.alibi_batch_stride + h]) : C(0);
  }
  __device__ C operator()(C dot, int64_t pos, int64_t j, C* dscore = nullptr) const {
    C s = dot * scale;
    C d = scale;
    if (softcap > C(0)) {
      const C t = cmath::tanh(s / softcap);
      s = softcap * t;
      d = scale * (C(1) - t * t);
    }
    if (dscore) *dscore = d;
    const int64_t dist = pos > j ? pos - j : j - pos;
    return s - slope * C(dist);
  }
};

template <class T, class C> __device__ __forceinline__ C dot_row(const C* a, const T* row, int64_t n) {
  C acc = C(0);
  for (int64_t d = 0; d < n; ++d) acc += a[d] * to_compute(row[d]);
  return acc;
}

template <class C> __device__ __forceinline__ C sink_of(const Geometry& g, const Pointers& p, int64_t h) {
  return g.sinks ? static_cast<const C*>(p.sinks)[h] : kernels::ninf<C>();
}

template <class T>
__global__ void __launch_bounds__(kWarps * 32) rowwise_fwd_kernel(Geometry g, Pointers p) {
  using C = compute_t<T>;
  __shared__ C qs[kWarps][kRowwiseMaxHeadDim];
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t b = blockIdx.z, h = blockIdx.y, i = int64_t(blockIdx.x) * kWarps + w;
  const Seq s = sequence(g, p, b);
  if (i >= s.sq) return;  // warp-uniform; the shared rows are per warp
  const int64_t hk = h / (g.hq / g.hkv);
  const T* q = row_ptr<T>(p.q, b, s.q_begin + i, h);
  for (int64_t d = lane; d < g.d; d += 32) qs[w][d] = to_compute(q[d]);
  __syncwarp();
  const ScoreRule<C> rule(g, p, b, h);
  int64_t lo, hi;
  visible_keys(g, s, i, lo, hi);
  C m = kernels::ninf<C>(), l = C(0), acc[kPerLane];
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) acc[t] = C(0);
  for (int64_t j0 = lo; j0 < hi; j0 += 32) {
    const int64_t j = j0 + lane;
    C sc = kernels::ninf<C>();
    if (j < hi) sc = rule(dot_row(qs[w], row_ptr<T>(p.k, b, s.k_begin + j, hk), g.d), i + s.off, j);
    const C mn = kernels::cmax(m, kernels::group_max<32>(sc));
    if (mn == kernels::ninf<C>()) continue;
    const C corr = cmath::exp(m - mn);
    const C pj = cmath::exp(sc - mn);
    l = l * corr + kernels::warp_sum(pj);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) acc[t] *= corr;
    const int n = int(min(int64_t(32), hi - j0));
    for (int jj = 0; jj < n; ++jj) {
      const C pb = __shfl_sync(0xffffffffu, pj, jj);
      const T* v = row_ptr<T>(p.v, b, s.k_begin + j0 + jj, hk);
#pragma unroll
      for (int t = 0; t < kPerLane; ++t)
        if (lane + 32 * t < g.dv) acc[t] += pb * to_compute(v[lane + 32 * t]);
    }
    m = mn;
  }
  if (g.sinks) {
    const C sink = sink_of<C>(g, p, h);
    const C mn = kernels::cmax(m, sink);
    const C corr = m == kernels::ninf<C>() ? C(0) : cmath::exp(m - mn);
    l = l * corr + cmath::exp(sink - mn);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) acc[t] *= corr;
    m = mn;
  }
  const C inv = l > C(0) ? C(1) / l : C(0);
  T* o = row_ptr_mut<T>(p.out, b, s.q_begin + i, h);
#pragma unroll
  for (int t = 0; t < kPerLane; ++t)
    if (lane + 32 * t < g.dv) o[lane + 32 * t] = from_compute<T>(acc[t] * inv);
  if (p.lse != nullptr && lane == 0)
    static_cast<C*>(p.lse)[lse_index(g, s, b, h, i)] = l > C(0) ? m + kernels::xlog(l) : kernels::ninf<C>();
}

// delta = sum(grad_out * out) per query row: the backward's row term.
template <class T>
__global__ void __launch_bounds__(kWarps * 32) rowwise_delta_kernel(Geometry g, Pointers p) {
  using C = compute_t<T>;
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t b = blockIdx.z, h = blockIdx.y, i = int64_t(blockIdx.x) * kWarps + w;
  const Seq s = sequence(g, p, b);
  if (i >= s.sq) return;
  const T* go = row_ptr<T>(p.grad_out, b, s.q_begin + i, h);
  const T* o = row_ptr<T>(p.out, b, s.q_begin + i, h);
  C acc = C(0);
  for (int64_t d = lane; d < g.dv; d += 32) acc += to_compute(go[d]) * to_compute(o[d]);
  acc = kernels::warp_sum(acc);
  if (lane == 0) static_cast<C*>(p.delta)[lse_index(g, s, b, h, i)] = acc;
}

// p and d(score) of one visible pair, from the saved lse (a row with lse = -inf saw nothing).
template <class C> __device__ __forceinline__ C prob(C score, C lse) {
  return lse == kernels::ninf<C>() ? C(0) : cmath::exp(score - lse);
}

template <class T>
__global__ void __launch_bounds__(kWarps * 32) rowwise_dq_kernel(Geometry g, Pointers p) {
  using C = compute_t<T>;
  __shared__ C qs[kWarps][kRowwiseMaxHeadDim];
  __shared__ C gos[kWarps][kRowwiseMaxHeadDim];
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t b = blockIdx.z, h = blockIdx.y, i = int64_t(blockIdx.x) * kWarps + w;
  const Seq s = sequence(g, p, b);
  if (i >= s.sq) return;
  const int64_t hk = h / (g.hq / g.hkv);
  const T* q = row_ptr<T>(p.q, b, s.q_begin + i, h);
  const T* go = row_ptr<T>(p.grad_out, b, s.q_begin + i, h);
  for (int64_t d = lane; d < g.d; d += 32) qs[w][d] = to_compute(q[d]);
  for (int64_t d = lane; d < g.dv; d += 32) gos[w][d] = to_compute(go[d]);
  __syncwarp();
  const ScoreRule<C> rule(g, p, b, h);
  const int64_t li = lse_index(g, s, b, h, i);
  const C lse = static_cast<const C*>(p.lse)[li], delta = static_cast<const C*>(p.delta)[li];
  int64_t lo, hi;
  visible_keys(g, s, i, lo, hi);
  C acc[kPerLane];
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) acc[t] = C(0);
  for (int64_t j0 = lo; j0 < hi; j0 += 32) {
    const int64_t j = j0 + lane;
    C ds = C(0);
    if (j < hi) {
      C dscore;
      const C sc = rule(dot_row(qs[w], row_ptr<T>(p.k, b, s.k_begin + j, hk), g.d), i + s.off, j, &dscore);
      const C pr = prob(sc, lse);
      const C dp = dot_row(gos[w], row_ptr<T>(p.v, b, s.k_begin + j, hk), g.dv);
      ds = pr * (dp - delta) * dscore;
    }
    const int n = int(min(int64_t(32), hi - j0));
    for (int jj = 0; jj < n; ++jj) {
      const C db = __shfl_sync(0xffffffffu, ds, jj);
      const T* k = row_ptr<T>(p.k, b, s.k_begin + j0 + jj, hk);
#pragma unroll
      for (int t = 0; t < kPerLane; ++t)
        if (lane + 32 * t < g.d) acc[t] += db * to_compute(k[lane + 32 * t]);
    }
  }
  T* gq = row_ptr_mut<T>(p.grad_q, b, s.q_begin + i, h);
#pragma unroll
  for (int t = 0; t < kPerLane; ++t)
    if (lane + 32 * t < g.d) gq[lane + 32 * t] = from_compute<T>(acc[t]);
}

// grad_k / grad_v of one key row: the sum over every query head of its group and every query that
// sees the key.
template <class T>
__global__ void __launch_bounds__(kWarps * 32) rowwise_dkv_kernel(Geometry g, Pointers p) {
  using C = compute_t<T>;
  __shared__ C ks[kWarps][kRowwiseMaxHeadDim];
  __shared__ C vs[kWarps][kRowwiseMaxHeadDim];
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t b = blockIdx.z, hk = blockIdx.y, j = int64_t(blockIdx.x) * kWarps + w;
  const Seq s = sequence(g, p, b);
  // Keys past seqused_k (or the sequence) get zero gradients.
  const int64_t rows_k = s.rows_k;
  if (j >= rows_k) return;
  const bool live = j < s.sk;
  const T* k = row_ptr<T>(p.k, b, s.k_begin + j, hk);
  const T* v = row_ptr<T>(p.v, b, s.k_begin + j, hk);
  for (int64_t d = lane; d < g.d; d += 32) ks[w][d] = to_compute(k[d]);
  for (int64_t d = lane; d < g.dv; d += 32) vs[w][d] = to_compute(v[d]);
  __syncwarp();
  C dk[kPerLane], dv[kPerLane];
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) dk[t] = dv[t] = C(0);
  const int64_t group = g.hq / g.hkv;
  int64_t lo = 0, hi = 0;
  if (live) visible_queries(g, s, j, lo, hi);
  for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    const ScoreRule<C> rule(g, p, b, h);
    for (int64_t i0 = lo; i0 < hi; i0 += 32) {
      const int64_t i = i0 + lane;
      C pr = C(0), ds = C(0);
      if (i < hi) {
        const int64_t li = lse_index(g, s, b, h, i);
        const C lse = static_cast<const C*>(p.lse)[li], delta = static_cast<const C*>(p.delta)[li];
        C dscore;
        const C sc = rule(dot_row(ks[w], row_ptr<T>(p.q, b, s.q_begin + i, h), g.d), i + s.off, j, &dscore);
        pr = prob(sc, lse);
        const C dp = dot_row(vs[w], row_ptr<T>(p.grad_out, b, s.q_begin + i, h), g.dv);
        ds = pr * (dp - delta) * dscore;
      }
      const int n = int(min(int64_t(32), hi - i0));
      for (int ii = 0; ii < n; ++ii) {
        const C pb = __shfl_sync(0xffffffffu, pr, ii), db = __shfl_sync(0xffffffffu, ds, ii);
        const T* q = row_ptr<T>(p.q, b, s.q_begin + i0 + ii, h);
        const T* go = row_ptr<T>(p.grad_out, b, s.q_begin + i0 + ii, h);
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) {
          if (lane + 32 * t < g.d) dk[t] += db * to_compute(q[lane + 32 * t]);
          if (lane + 32 * t < g.dv) dv[t] += pb * to_compute(go[lane + 32 * t]);
        }
      }
    }
  }
  T* gk = row_ptr_mut<T>(p.grad_k, b, s.k_begin + j, hk);
  T* gv = row_ptr_mut<T>(p.grad_v, b, s.k_begin + j, hk);
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    if (lane + 32 * t < g.d) gk[lane + 32 * t] = from_compute<T>(dk[t]);
    if (lane + 32 * t < g.dv) gv[lane + 32 * t] = from_compute<T>(dv[t]);
  }
}

// grad_sinks[h] = -sum over rows of exp(sink - lse) * delta, one block per head, in a fixed order.
template <class C>
__global__ void __launch_bounds__(256) rowwise_dsink_kernel(Geometry g, Pointers p) {
  __shared__ C sh[32];
  const int64_t h = blockIdx.x;
  const C sink = static_cast<const C*>(p.sinks)[h];
  C acc = C(0);
  for (int64_t b = 0; b < g.batch; ++b) {
    const Seq s = sequence(g, p, b);
    for (int64_t i = threadIdx.x; i < s.sq; i += blockDim.x) {
      const int64_t li = lse_index(g, s, b, h, i);
      const C lse = static_cast<const C*>(p.lse)[li];
      acc -= prob(sink, lse) * static_cast<const C*>(p.delta)[li];
    }
  }
  acc = kernels::block_sum(acc, sh);
  if (threadIdx.x == 0) static_cast<C*>(p.grad_sinks)[h] = acc;
}

dim3 rows_grid(int64_t rows, int64_t heads, int64_t batch) {
  return dim3(unsigned((rows + kWarps - 1) / kWarps), unsigned(heads), unsigned(batch));
}

}  // namespace

void rowwise_forward(const Geometry& g, const Pointers& p, void* stream) {
  if (g.batch == 0 || g.sq == 0 || g.hq == 0) return;
  auto st = static_cast<cudaStream_t>(stream);
  kernels::dispatch_float_dtype(g.dtype, "attention: no rowwise kernel", [&](auto tag) {
    using T = typename decltype(tag)::type;
    rowwise_fwd_kernel<T><<<rows_grid(g.sq, g.hq, g.batch), kWarps * 32, 0, st>>>(g, p);
  });
  cuda_check(cudaGetLastError(), "attention rowwise forward launch");
}

void backward_delta(const Geometry& g, const Pointers& p, void* stream) {
  if (g.batch == 0 || g.hq == 0 || g.sq == 0) return;
  kernels::dispatch_float_dtype(g.dtype, "attention: no rowwise kernel", [&](auto tag) {
    using T = typename decltype(tag)::type;
    rowwise_delta_kernel<T><<<rows_grid(g.sq, g.hq, g.batch), kWarps * 32, 0, static_cast<cudaStream_t>(stream)>>>(g, p);
  });
  cuda_check(cudaGetLastError(), "attention delta launch");
}

void backward_sinks(const Geometry& g, const Pointers& p, void* stream) {
  if (!g.sinks || p.grad_sinks == nullptr || g.hq == 0) return;
  auto st = static_cast<cudaStream_t>(stream);
  if (g.dtype == DType::Float64) rowwise_dsink_kernel<double><<<unsigned(g.hq), 256, 0, st>>>(g, p);
  else rowwise_dsink_kernel<float><<<unsigned(g.hq), 256, 0, st>>>(g, p);
  cuda_check(cudaGetLastError(), "attention grad_sinks launch");
}

void rowwise_backward(const Geometry& g, const Pointers& p, void* stream) {
  if (g.batch == 0 || g.hq == 0) return;
  auto st = static_cast<cudaStream_t>(stream);
  backward_delta(g, p, stream);
  kernels::dispatch_float_dtype(g.dtype, "attention: no rowwise kernel", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (g.sq > 0) rowwise_dq_kernel<T><<<rows_grid(g.sq, g.hq, g.batch), kWarps * 32, 0, st>>>(g, p);
    if (g.sk > 0) rowwise_dkv_kernel<T><<<rows_grid(g.sk, g.hkv, g.batch), kWarps * 32, 0, st>>>(g, p);
  });
  cuda_check(cudaGetLastError(), "attention rowwise backward launch");
  backward_sinks(g, p, stream);
}

}  // namespace baracuda::attention
