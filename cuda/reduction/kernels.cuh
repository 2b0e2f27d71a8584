// The reduction engine: every forward op (and every backward statistic) is a reducer from
// reducers.cuh run by these kernels over a coalesced geometry (red_launch.h).
//   rows:     one reduced dim with unit stride. G threads per output (4, a warp, or a block of
//             256); 16-byte vector loads after a scalar head that reaches 16-byte alignment.
//   columns:  the innermost kept dim has unit stride: each thread owns V adjacent outputs and
//             walks the reduced dims (8 row slices per block, merged in order in shared memory).
//   strided:  any strides: G threads per output, reduced offsets by division.
// With splits > 1 each output's reduced range is cut into `splits` pieces whose states go to
// the workspace; a finish kernel (a warp per output) merges them in order. No atomics: the
// result depends only on the launch configuration, which depends only on the plan.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "reduction/red_launch.h"
#include "reduction/reducers.cuh"

namespace baracuda::kernels::red {

using baracuda::red::Geometry;
using baracuda::red::RedLaunch;

constexpr int kBlock = 256;

template <class T, int N> struct alignas(sizeof(T) * N >= 16 ? 16 : sizeof(T) * N) Vec { T v[N]; };
template <class T> constexpr int vec_of() { return std::max(1, std::min(8, int(16 / sizeof(T)))); }

template <class S> __device__ __forceinline__ S shfl_xor_state(const S& s, int mask) {
  constexpr int W = int((sizeof(S) + 3) / 4);
  int w[W];
  memset(w, 0, sizeof w);
  memcpy(w, &s, sizeof(S));
#pragma unroll
  for (int i = 0; i < W; ++i) w[i] = __shfl_xor_sync(0xffffffffu, w[i], mask);
  S r;
  memcpy(&r, w, sizeof(S));
  return r;
}

__device__ __forceinline__ void kept_offsets(const Geometry& g, int64_t k, int64_t& in, int64_t& out) {
  if (g.nkept == 1) { in = k * g.kept_in[0]; out = k * g.kept_out[0]; return; }
  in = 0; out = 0;
  for (int d = 0; d < g.nkept; ++d) {
    const int64_t q = k / g.kept_size[d], i = k - q * g.kept_size[d];
    in += i * g.kept_in[d];
    out += i * g.kept_out[d];
    k = q;
  }
}

template <bool IDX> __device__ __forceinline__ int64_t red_offset(const Geometry& g, int64_t r, int64_t& idx) {
  if (g.nred <= 1) {
    if constexpr (IDX) idx = r * g.red_idx[0];
    return r * g.red_in[0];
  }
  int64_t off = 0, ix = 0;
  for (int d = 0; d < g.nred; ++d) {
    const int64_t q = r / g.red_size[d], i = r - q * g.red_size[d];
    off += i * g.red_in[d];
    if constexpr (IDX) ix += i * g.red_idx[d];
    r = q;
  }
  if constexpr (IDX) idx = ix;
  return off;
}

// Merge the states of a group of G consecutive threads; the group's lane 0 ends with the total.
template <int G, class Red> __device__ __forceinline__ void group_merge(const Red& red, typename Red::State& s) {
  using State = typename Red::State;
#pragma unroll
  for (int m = (G < 32 ? G : 32) / 2; m > 0; m >>= 1) red.merge(s, shfl_xor_state(s, m));
  if constexpr (G > 32) {
    __shared__ State part[G / 32];
    const int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0) part[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
      s = part[0];
      for (int w = 1; w < G / 32; ++w) red.merge(s, part[w]);
    }
  }
}

// ---- rows / strided ---------------------------------------------------------------------------
template <int G, class Red, class T>
__device__ __forceinline__ void fold_contiguous(const Red& red, typename Red::State& s, const T* p, int64_t r0,
                                                int64_t r1, int lane) {
  constexpr int V = vec_of<T>();
  constexpr int U = 4;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p + r0);
  int64_t head = int64_t((16 - a % 16) % 16) / int64_t(sizeof(T));
  head = std::min<int64_t>(head, r1 - r0);
  for (int64_t i = r0 + lane; i < r0 + head; i += G) red.add(s, p[i], i);
  const int64_t b0 = r0 + head;
  const int64_t nvec = (r1 - b0) / V;
  const Vec<T, V>* vp = reinterpret_cast<const Vec<T, V>*>(p + b0);
  for (int64_t c = lane; c < nvec; c += int64_t(G) * U) {
    Vec<T, V> v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (c + u * G < nvec) v[u] = vp[c + u * G];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (c + u * G < nvec) {
#pragma unroll
        for (int e = 0; e < V; ++e) red.add(s, v[u].v[e], b0 + (c + u * G) * V + e);
      }
  }
  for (int64_t i = b0 + nvec * V + lane; i < r1; i += G) red.add(s, p[i], i);
}

template <int G, class Red, class T>
__device__ __forceinline__ void fold_strided(const Red& red, typename Red::State& s, const Geometry& g, const T* p,
                                             int64_t r0, int64_t r1, int lane) {
  constexpr int U = 4;
  for (int64_t r = r0 + lane; r < r1; r += int64_t(G) * U) {
    T v[U];
    int64_t idx[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (r + u * G < r1) v[u] = p[red_offset<Red::kIndex>(g, r + u * G, idx[u])];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (r + u * G < r1) red.add(s, v[u], idx[u]);
  }
}

template <int G, bool CONTIG, class Red, class T, class O>
__global__ void __launch_bounds__(kBlock)
rows_kernel(Red red, Geometry g, int64_t seg, const T* in, O* out, typename Red::State* partial) {
  constexpr int kPerBlock = kBlock / G;
  const int lane = threadIdx.x % G;
  const int64_t k = int64_t(blockIdx.x) * kPerBlock + threadIdx.x / G;
  typename Red::State s = red.init();
  int64_t ib = 0, ob = 0;
  if (k < g.K) {
    kept_offsets(g, k, ib, ob);
    const int64_t r0 = int64_t(blockIdx.y) * seg;
    const int64_t r1 = std::min(g.R, r0 + seg);
    if constexpr (CONTIG) fold_contiguous<G>(red, s, in + ib, r0, r1, lane);
    else fold_strided<G>(red, s, g, in + ib, r0, r1, lane);
  }
  group_merge<G>(red, s);
  if (lane == 0 && k < g.K) {
    if (gridDim.y == 1) out[ob] = red.finish(s, g.R);
    else partial[k * gridDim.y + blockIdx.y] = s;
  }
}

// ---- columns ---------------------------------------------------------------------------------
template <int V, class Red, class T, class O>
__global__ void __launch_bounds__(kBlock)
columns_kernel(Red red, Geometry g, int64_t rows_per_split, const T* in, O* out, typename Red::State* partial) {
  using State = typename Red::State;
  constexpr int U = 4;
  __shared__ State part[8][32];
  const int64_t k = (int64_t(blockIdx.x) * 32 + threadIdx.x) * V;  // first of this thread's V outputs
  State s[V];
#pragma unroll
  for (int v = 0; v < V; ++v) s[v] = red.init();
  int64_t ib = 0, ob = 0;
  if (k < g.K) {
    kept_offsets(g, k, ib, ob);
    const int64_t r0 = int64_t(blockIdx.y) * rows_per_split;
    const int64_t r1 = std::min(g.R, r0 + rows_per_split);
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8 * U) {
      Vec<T, V> x[U];
      int64_t idx[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (r + 8 * u < r1) x[u] = *reinterpret_cast<const Vec<T, V>*>(in + ib + red_offset<Red::kIndex>(g, r + 8 * u, idx[u]));
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (r + 8 * u < r1) {
#pragma unroll
          for (int v = 0; v < V; ++v) red.add(s[v], x[u].v[v], idx[u]);
        }
    }
  }
  // Merge the 8 row slices in order, one output of the V at a time (small shared memory for
  // any state size).
#pragma unroll
  for (int v = 0; v < V; ++v) {
    part[threadIdx.y][threadIdx.x] = s[v];
    __syncthreads();
    if (threadIdx.y == 0 && k < g.K) {
      State t = part[0][threadIdx.x];
      for (int y = 1; y < 8; ++y) red.merge(t, part[y][threadIdx.x]);
      if (gridDim.y == 1) out[ob + v * g.kept_out[0]] = red.finish(t, g.R);
      else partial[int64_t(blockIdx.y) * g.K + k + v] = t;
    }
    __syncthreads();
  }
}

// ---- finish: merge the splits of each output in order (a warp per output) ----------------------
template <class Red, class O>
__global__ void __launch_bounds__(kBlock)
finish_kernel(Red red, Geometry g, int splits, int64_t stride_k, int64_t stride_split,
              const typename Red::State* partial, O* out) {
  const int64_t k = int64_t(blockIdx.x) * (kBlock / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  typename Red::State s = red.init();
  if (k < g.K)
    for (int i = lane; i < splits; i += 32) red.merge(s, partial[k * stride_k + int64_t(i) * stride_split]);
  group_merge<32>(red, s);
  if (lane == 0 && k < g.K) {
    int64_t ib, ob;
    kept_offsets(g, k, ib, ob);
    out[ob] = red.finish(s, g.R);
  }
}

inline unsigned blocks_for(int64_t n, int64_t per) { return unsigned((n + per - 1) / per); }

template <int G, bool CONTIG, class Red, class T, class O>
void launch_rows_g(const Red& red, const RedLaunch& L, cudaStream_t st) {
  using State = typename Red::State;
  const dim3 grid(blocks_for(L.g.K, kBlock / G), unsigned(L.splits));
  const int64_t seg = L.splits > 1 ? L.seg : std::max<int64_t>(L.g.R, 1);
  rows_kernel<G, CONTIG, Red, T, O><<<grid, kBlock, 0, st>>>(red, L.g, seg, static_cast<const T*>(L.in),
                                                             static_cast<O*>(L.out), static_cast<State*>(L.workspace));
  check_launch(CONTIG ? "reduction rows_kernel" : "reduction strided_kernel");
}

template <bool CONTIG, class Red, class T, class O>
void launch_rows(const Red& red, const RedLaunch& L, cudaStream_t st) {
  switch (L.group) {
    case 1: if constexpr (!CONTIG) return launch_rows_g<1, CONTIG, Red, T, O>(red, L, st); break;
    case 4: return launch_rows_g<4, CONTIG, Red, T, O>(red, L, st);
    case 32: return launch_rows_g<32, CONTIG, Red, T, O>(red, L, st);
    default: return launch_rows_g<kBlock, CONTIG, Red, T, O>(red, L, st);
  }
  return launch_rows_g<4, CONTIG, Red, T, O>(red, L, st);
}

template <class Red>
void launch_reduction(const Red& red, const RedLaunch& L, cudaStream_t st) {
  using State = typename Red::State;
  using T = typename Red::In;
  using O = typename Red::Out;
  if (L.g.K == 0) return;
  State* partial = static_cast<State*>(L.workspace);
  int64_t stride_k = L.splits, stride_split = 1;
  if (L.path == baracuda::red::Path::Columns) {
    constexpr int V = vec_of<T>();
    // Vectors need every address this thread reads to be V-element aligned: the base pointer,
    // and (checked at select) the strides; fall back to V = 1 otherwise.
    const bool vec_ok = L.vec == V && reinterpret_cast<uintptr_t>(L.in) % alignof(Vec<T, V>) == 0;
    const int64_t rows = L.splits > 1 ? L.seg : std::max<int64_t>(L.g.R, 1);
    if (vec_ok) {
      const dim3 grid(blocks_for(L.g.K / V, 32), unsigned(L.splits));
      columns_kernel<V, Red, T, O><<<grid, dim3(32, 8), 0, st>>>(red, L.g, rows, static_cast<const T*>(L.in),
                                                                   static_cast<O*>(L.out), partial);
    } else {
      const dim3 grid(blocks_for(L.g.K, 32), unsigned(L.splits));
      columns_kernel<1, Red, T, O><<<grid, dim3(32, 8), 0, st>>>(red, L.g, rows, static_cast<const T*>(L.in),
                                                                   static_cast<O*>(L.out), partial);
    }
    check_launch("reduction columns_kernel");
    stride_k = 1;
    stride_split = L.g.K;
  } else if (L.path == baracuda::red::Path::Rows) {
    launch_rows<true, Red, T, O>(red, L, st);
  } else {
    launch_rows<false, Red, T, O>(red, L, st);
  }
  if (L.splits > 1) {
    finish_kernel<Red, O><<<blocks_for(L.g.K, kBlock / 32), kBlock, 0, st>>>(red, L.g, L.splits, stride_k, stride_split,
                                                                           partial, static_cast<O*>(L.out));
    check_launch("reduction finish_kernel");
  }
}

}  // namespace baracuda::kernels::red
