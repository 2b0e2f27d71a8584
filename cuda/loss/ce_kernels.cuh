// Cross-entropy kernels (large vocabularies), templated on the logits type T.
//
//   ce_totals   one block: sum_i w[t_i] over non-ignored rows (the mean's denominator) and
//               sum_c w_c (the label-smoothing term's weight); fixed order.
//   ce_partial  grid (rows, chunks): online (max, sum exp) and sum w_c * x_c of one column
//               chunk, 16-byte loads, to the workspace.
//   ce_rows     a thread per row: combines its chunks in order -> lse, per-row loss.
//   ce_reduce   one block: sum of the per-row losses (fixed order) -> mean / sum.
//   ce_grad     grid (rows, chunks): the gradient from lse, in the logits dtype.
//   ce_cluster  (sm_90) the one-read path: a thread-block cluster of C <= 8 CTAs per row, each
//               CTA holding its slice of the row in registers (K 16-byte vectors per thread,
//               all loads issued before any math). Thread (max, sum exp) -> block -> the
//               cluster's C partials read through distributed shared memory in rank order (every
//               CTA gets the same lse); rank 0 writes lse and the row loss; with a gradient every
//               CTA writes its slice from the registers. Logits read once, gradient written once.
//
// A target outside [0, V) that is not ignore_index cannot be seen by select(): its row's loss,
// weight and gradient are NaN (so a mean or sum is NaN), nothing is read out of bounds.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "common/cluster_launch.h"
#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/per_arch.cuh"
#include "loss/loss_common.cuh"
#include "loss/loss_launch.h"

namespace baracuda::loss::detail {

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
  int cl_size;       // cluster path: CTAs per row (1..8)
  int64_t cl_slice;  // cluster path: elements per CTA (multiple of the vector width)
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
      for (int j = 0; j < V; ++j) cm = cmax(cm, v[u][j]);
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
  poison_inf(m, s);
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

// ---- the cluster path (sm_90) ---------------------------------------------------------------
// The slice is held as raw 16-byte words. `opaque` makes the compiler forget what it derived
// from them, so each phase converts again instead of keeping K * V f32 values live (which
// would cost K * V registers instead of 4 * K).
__device__ __forceinline__ void opaque(uint4& u) { asm volatile("" : "+r"(u.x), "+r"(u.y), "+r"(u.z), "+r"(u.w)); }
// The same for a thread's first offset, so K offsets are not kept live from phase to phase.
__device__ __forceinline__ int opaque_base(int b) {
  asm volatile("" : "+r"(b));
  return b;
}
template <class T, int V> union RawPack {
  uint4 u;
  Pack<T, V> p;
};
template <class T, int V> __device__ __forceinline__ acc_of<T> elem(const uint4& u, int j) {
  RawPack<T, V> rp;
  rp.u = u;
  return acc_of<T>(to_compute(rp.p.v[j]));
}
// K = 8: at most 256 threads, 3 CTAs per SM (80 registers); K <= 4: at most 512 threads, 2 CTAs
// per SM (64 registers). Both keep 64-96 KB of loads in flight per SM.
template <class T, int K, bool SMOOTH>
__global__ void __launch_bounds__(ce_cluster_max_threads(K), K >= 8 ? 3 : 2) ce_cluster(CeParams<T> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using A = acc_of<T>;
  constexpr int V = int(16 / sizeof(T));
  constexpr A kL2E = A(1.4426950408889634);
  __shared__ A shm[32], shs[32], shz[32];
  __shared__ A part[3];  // this CTA's (max, sum exp, sum w*x); the cluster reads it
  __shared__ A stat[3];  // the row's (max, sum exp, sum w*x)
  const int C = p.cl_size;
  const int rank = C > 1 ? int(__clusterRelativeBlockRank()) : 0;
  const int64_t row = int64_t(blockIdx.x) / C;
  const int64_t lo = int64_t(rank) * p.cl_slice, hi = min(p.v, lo + p.cl_slice);
  const T* xr = p.x + row * p.x_stride;
  const T* xs = xr + lo;  // this CTA's slice; 32-bit offsets within it
  const int len = int(hi - lo);
  const int nt = blockDim.x;
  constexpr bool smooth = SMOOTH;  // label smoothing: the sum of w * x and its gradient term

  // 1. Every load of the slice in flight at once (K x 16 bytes per thread).
  uint4 r[K];
  RawPack<T, V> pad;
#pragma unroll
  for (int j = 0; j < V; ++j) pad.p.v[j] = from_compute<T>(ninf<A>());
  {
  const int b0 = opaque_base(int(threadIdx.x) * V);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int o = b0 + k * nt * V;
    r[k] = o + V <= len ? *reinterpret_cast<const uint4*>(xs + o) : pad.u;
  }
  }
  if (len > 0 && len % V != 0) {  // rare (odd V with one row, or padded rows): the slice's last, partial vector
    const int o = len / V * V;
    if ((o / V) % nt == int(threadIdx.x)) {
      RawPack<T, V> tp;
#pragma unroll
      for (int j = 0; j < V; ++j) tp.p.v[j] = o + j < len ? xs[o + j] : pad.p.v[j];
      const int kk = (o / V) / nt;
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (k == kk) r[k] = tp.u;
    }
  }
  // 2. Thread max, then one exp per element against it (NaN: fmax skips it, exp keeps it).
  A m = ninf<A>();
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int j = 0; j < V; ++j) m = cmax(m, elem<T, V>(r[k], j));
#pragma unroll
  for (int k = 0; k < K; ++k) opaque(r[k]);
  const A ms = m == ninf<A>() ? A(0) : m;
  const A ml2 = ms * kL2E;
  A s = 0, z = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) {  // pairwise within a vector, then in order across vectors
    A e[V];
#pragma unroll
    for (int j = 0; j < V; ++j) e[j] = exp_shift<T>(elem<T, V>(r[k], j), ms, ml2);
#pragma unroll
    for (int w = 1; w < V; w *= 2)
#pragma unroll
      for (int j = 0; j + w < V; j += 2 * w) e[j] += e[j + w];
    s += e[0];
  }
  if constexpr (smooth) {
#pragma unroll
    for (int k = 0; k < K; ++k) opaque(r[k]);
    const int b0 = opaque_base(int(threadIdx.x) * V);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int o = b0 + k * nt * V;
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (o + j < len) z += weight_of<T, A>(p, lo + o + j) * elem<T, V>(r[k], j);
    }
  }
  // 3. Block, then cluster (rank order: every CTA computes the same row statistics).
  block_combine<T>(m, s, shm, shs);
  if (smooth) z = block_sum(z, shz);
  if (C > 1) {
    if (threadIdx.x == 0) {
      part[0] = m;
      part[1] = s;
      part[2] = z;
    }
    __cluster_barrier_arrive();  // release: part[] visible to the cluster
    __cluster_barrier_wait();
    if (threadIdx.x == 0) {
      A M = ninf<A>(), S = 0, Z = 0;
      for (int q = 0; q < C; ++q) {
        const A* pq = static_cast<const A*>(__cluster_map_shared_rank(static_cast<void*>(part), unsigned(q)));
        combine<T>(M, S, pq[0], pq[1]);
        Z += pq[2];
      }
      stat[0] = M;
      stat[1] = S;
      stat[2] = Z;
    }
    __cluster_barrier_arrive();  // done reading the others' part[]; waited for before exiting
    __syncthreads();
    m = stat[0];
    s = stat[1];
    z = stat[2];
  }
  poison_inf(m, s);
  if (m == ninf<A>()) s = qnan<A>();  // every logit -inf: NaN, as torch
  const A lse = m + xlog(s);

  // 4. The row's loss (rank 0).
  const int64_t t = target_of(p, row);
  const bool ignored = t == p.ignore, bad = !ignored && (t < 0 || t >= p.v);
  if (rank == 0 && threadIdx.x == 0) {
    A loss = 0, w = 0;
    if (bad) {
      loss = w = qnan<A>();
    } else if (!ignored) {
      w = weight_of<T, A>(p, t);
      const A xt = A(to_compute(p.x[row * p.x_stride + t]));
      loss = (A(1) - p.eps) * w * (lse - xt);
      if (smooth) loss += p.eps / A(p.v) * (p.scal[1] * lse - z);
    }
    p.lse[row * p.lse_stride] = lse;
    if (p.reduction == 0) {
      p.out[row * p.out_stride] = from_compute<T>(loss);
    } else {
      p.rloss[row] = loss;
      p.rw[row] = w;
    }
  }

  // 5. The gradient of the slice, from the registers.
  if (p.grad != nullptr) {
    T* gs = p.grad + row * p.gx_stride + lo;
    const int64_t tl = t - lo;  // the target's offset in the slice (any value)
    A g = p.grad_loss ? A(to_compute(p.grad_loss[row * p.gl_stride])) : A(1);
    if (p.reduction == 1) g /= p.scal[0];
    const A wt = (ignored || bad) ? A(0) : weight_of<T, A>(p, t);
    const A es = p.eps / A(p.v);
    const A ga = g * ((A(1) - p.eps) * wt + es * p.scal[1]);
    const A gh = g * (A(1) - p.eps) * wt;
    const A ge = g * es;
    const bool wsm = smooth && p.weight != nullptr;
    const A ll2 = lse * kL2E;
#pragma unroll
    for (int k = 0; k < K; ++k) opaque(r[k]);
    const int b0 = opaque_base(int(threadIdx.x) * V);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int o = b0 + k * nt * V;
      if (o >= len) continue;
      A d[V];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A e = exp_shift<T>(elem<T, V>(r[k], j), lse, ll2);
        d[j] = wsm ? ga * e - ge * weight_of<T, A>(p, lo + (o + j < len ? o + j : 0)) : ga * e - ge;
      }
      if (tl >= o && tl < o + V) {
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (o + j == tl) d[j] -= gh;
      }
      if (ignored || bad) {
#pragma unroll
        for (int j = 0; j < V; ++j) d[j] = ignored ? A(0) : qnan<A>();
      }
      if (o + V <= len) {
        store_vec<T>(gs + o, d);  // one 16-byte store (common/packed_vec.cuh)
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (o + j < len) gs[o + j] = from_compute<T>(d[j]);
      }
    }
  }
  if (C > 1) __cluster_barrier_wait();  // no CTA leaves while a peer may still read its part[]
#else
  __trap();  // select() / ce_launch() never pick this kernel below sm_90
#endif
}

// ---- the streaming forward (any arch; forward only, no label smoothing, 16-byte rows) --------
// grid (rows, chunks), kThreads threads: each iteration issues K raw 16-byte loads per thread
// (none converted before all are in flight), then ONE max over them, one rescale of the running
// sum, and one FFMA + MUFU + FADD per element (about 5 instructions per element; ce_partial spends
// ~15 with its per-vector online combine). <= 64 registers: 4 CTAs per SM, 128 KB in flight.
// Partials to the workspace (z = 0), combined in order by ce_rows: deterministic.
template <class T, int K>
__global__ void __launch_bounds__(kThreads, 3) ce_stream(CeParams<T> p) {
  using A = acc_of<T>;
  constexpr int V = int(16 / sizeof(T));
  constexpr A kL2E = A(1.4426950408889634);
  __shared__ A shm[32], shs[32];
  const int64_t row = blockIdx.x;
  const int c = blockIdx.y;
  const int64_t lo = int64_t(c) * p.chunk_len, hi = min(p.v, lo + p.chunk_len);
  const T* xs = p.x + row * p.x_stride + lo;
  const int len = int(hi - lo);  // chunk_len < 2^31 (select)
  constexpr int step = kThreads * V;
  RawPack<T, V> pad;
#pragma unroll
  for (int j = 0; j < V; ++j) pad.p.v[j] = from_compute<T>(ninf<A>());
  A m = ninf<A>(), s = 0;
  for (int i0 = int(threadIdx.x) * V; i0 < len; i0 += step * K) {
    uint4 r[K];
    if (i0 + (K - 1) * step + V <= len) {
#pragma unroll
      for (int k = 0; k < K; ++k) r[k] = *reinterpret_cast<const uint4*>(xs + i0 + k * step);
    } else {  // the chunk's last iteration: bounds per vector, a partial last vector element-wise
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int o = i0 + k * step;
        if (o + V <= len) {
          r[k] = *reinterpret_cast<const uint4*>(xs + o);
        } else {
          RawPack<T, V> tp;
#pragma unroll
          for (int j = 0; j < V; ++j) tp.p.v[j] = o + j < len ? xs[o + j] : pad.p.v[j];
          r[k] = tp.u;
        }
      }
    }
    A mn = m;
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) mn = cmax(mn, elem<T, V>(r[k], j));
#pragma unroll
    for (int k = 0; k < K; ++k) opaque(r[k]);
    // rescale the running sum to the new maximum (m == -inf: s is 0 or NaN; NaN stays NaN)
    if (mn != m) s *= m == ninf<A>() ? A(0) : xexp<T>(m - mn);
    m = mn;
    const A ms = m == ninf<A>() ? A(0) : m;
    const A ml2 = ms * kL2E;
#pragma unroll
    for (int k = 0; k < K; ++k) {  // pairwise within a vector, then in order across vectors
      A e[V];
#pragma unroll
      for (int j = 0; j < V; ++j) e[j] = exp_shift<T>(elem<T, V>(r[k], j), ms, ml2);
#pragma unroll
      for (int w = 1; w < V; w *= 2)
#pragma unroll
        for (int j = 0; j + w < V; j += 2 * w) e[j] += e[j + w];
      s += e[0];
    }
  }
  block_combine<T>(m, s, shm, shs);
  if (threadIdx.x == 0) {
    const int64_t k = row * p.chunks + c, nk = p.n * int64_t(p.chunks);
    p.part[k] = m;
    p.part[nk + k] = s;
    p.part[2 * nk + k] = A(0);
  }
}

template <class T, int K>
void launch_cluster(const CeParams<T>& p, const CeLaunch& L, cudaStream_t st) {
  auto kern = p.eps != acc_of<T>(0) ? ce_cluster<T, K, true> : ce_cluster<T, K, false>;
  if (L.cl_size > 8)  // 16 CTAs per cluster is sm_90's non-portable maximum
    cuda_check(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
               "cudaFuncSetAttribute(cross_entropy cluster, non-portable cluster size)");
  ClusterLaunch(dim3(unsigned(L.n * L.cl_size)), dim3(unsigned(L.cl_threads)), 0, st, unsigned(L.cl_size))
      .launch(kern, "cudaLaunchKernelEx(cross_entropy cluster)", p);
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
  p.cl_size = L.cl_size;
  p.cl_slice = L.cl_slice;

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
  if (L.forward && L.cluster) {  // one kernel: loss, lse and (with_grad) the gradient
    switch (L.cl_k) {
      case 2: launch_cluster<T, 2>(p, L, st); break;
      case 4: launch_cluster<T, 4>(p, L, st); break;
      default: launch_cluster<T, 8>(p, L, st); break;
    }
    check_launch("cross_entropy cluster");
    if (L.reduction != Reduction::None) {
      ce_reduce<T><<<1, 1024, 0, st>>>(p);
      check_launch("cross_entropy reduce");
    }
    return;
  }
  if (L.forward) {
    if (L.vec && L.stream && !L.with_grad && L.label_smoothing == 0.0) ce_stream<T, (sizeof(T) == 8 ? 4 : 8)><<<grid, kThreads, 0, st>>>(p);
    else if (L.vec) ce_partial<T, VV><<<grid, kThreads, 0, st>>>(p);
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
