// The reduction engine: every forward op (and every backward statistic) is a reducer from
// reducers.cuh run by these kernels over a coalesced geometry (reduction_launch.h).
//   rows:       one reduced dim with unit stride. G threads per output (4, a warp, or a block
//               of 256); 16-byte vector loads after a scalar head that reaches 16-byte
//               alignment, kU (8) vectors = 128 bytes in flight per thread, folded as one chunk
//               (reducers' add_n: short dependency chains).
//   short rows: rows of at most 64 vectors whose starts are all 16-byte aligned: a group of 8
//               lanes per row, M rows per group (P vectors per lane per row, P x M = 8 loads in
//               flight), several rows per warp; with M = 8 a transposed butterfly leaves lane l
//               with row l's total (7 shuffles for 8 rows instead of 24).
//   columns:    the innermost kept dim has unit stride: each thread owns V adjacent outputs (a
//               16-byte vector), a block is (256 / WY) threads along the kept axis x WY row
//               slices, each thread walks its rows kU at a time (partials in registers); the
//               WY slices are merged in order in shared memory.
//   strided:    any strides: G threads per output, reduced offsets by division.
// With splits > 1 each output's reduced range is cut into `splits` pieces whose states go to
// the workspace; a finish kernel merges them in order (rows: a warp or a block per output;
// columns: a thread per output, coalesced over the kept axis). No atomics: the result depends
// only on the launch configuration, which depends only on the plan.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/packed_vec.cuh"
#include "reduction/reduction_launch.h"
#include "reduction/reducers.cuh"

namespace baracuda::reduction::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

using baracuda::reduction::Geometry;
using baracuda::reduction::RedLaunch;

constexpr int kBlock = 256;
constexpr int kU = 8;  // 16-byte loads in flight per thread (128 bytes)
// Resident blocks asked of ptxas for the streaming kernels: 3 x 256 threads (<= 80 registers)
// for one-word states (sums, extremes of halves and f32), so that 768 threads x 128 bytes are
// in flight per SM; 2 (<= 128 registers) for the larger states (logsumexp, var, argmax, f64).
template <class S> constexpr int min_blocks() { return sizeof(S) <= 4 ? 3 : 2; }

template <class R, class = void> struct bulk_of : std::false_type {};
template <class R> struct bulk_of<R, std::void_t<decltype(R::kBulk)>> : std::bool_constant<R::kBulk> {};

// Fold N elements (in increasing logical index when ORDERED); idx(j): element j's logical index.
template <bool ORDERED, class Red, class T, int N, class IdxF>
__device__ __forceinline__ void fold_n(const Red& red, typename Red::State& s, const T (&v)[N], IdxF idx) {
  if constexpr (bulk_of<Red>::value) {
    red.template add_n<ORDERED>(s, v, idx);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) red.add(s, v[j], idx(j));
  }
}

// Output element o: the reducer's finish, or its own store where the output type is chosen at
// run time (Out = void; reducers.cuh's header).
template <class Red, class O>
__device__ __forceinline__ void put_out(const Red& red, O* out, int64_t o, const typename Red::State& s, int64_t n) {
  if constexpr (std::is_void_v<O>) red.store(out, o, s, n);
  else out[o] = red.finish(s, n);
}

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
  const uintptr_t a = reinterpret_cast<uintptr_t>(p + r0);
  int64_t head = int64_t((16 - a % 16) % 16) / int64_t(sizeof(T));
  head = std::min<int64_t>(head, r1 - r0);
  for (int64_t i = r0 + lane; i < r0 + head; i += G) red.add(s, p[i], i);
  const int64_t b0 = r0 + head;
  const int64_t nvec = (r1 - b0) / V;
  const Pack<T, V>* vp = reinterpret_cast<const Pack<T, V>*>(p + b0);
  int64_t c = lane;
  // Full chunks: kU vectors per lane, no guards, one fold per chunk.
  for (; c + int64_t(kU - 1) * G < nvec; c += int64_t(G) * kU) {
    Pack<T, V> v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) v[u] = vp[c + u * G];
    T x[kU * V];
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int e = 0; e < V; ++e) x[u * V + e] = v[u].v[e];
    fold_n<true>(red, s, x, [&](int j) { return b0 + (c + int64_t(j / V) * G) * V + j % V; });
  }
  // The rest (fewer than kU vectors for this lane): one guarded batch, folded vector by vector.
  if (c < nvec) {
    Pack<T, V> v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (c + u * G < nvec) v[u] = vp[c + u * G];
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (c + u * G < nvec) {
        const int64_t cu = c + u * G;
        fold_n<true>(red, s, v[u].v, [&](int j) { return b0 + cu * V + j; });
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
__global__ void __launch_bounds__(kBlock, min_blocks<typename Red::State>())
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
    if (gridDim.y == 1) put_out(red, out, ob, s, g.R);
    else partial[k * gridDim.y + blockIdx.y] = s;
  }
}

// ---- short rows ------------------------------------------------------------------------------
// One kept dim, rows of exactly G * P vectors whose starts are all 16-byte aligned (select
// checks R and the stride; the launcher checks the base pointer). Groups of G lanes, M rows per
// group (rows grp * M + m of the block's GPB * M rows, so a group's outputs are adjacent), P
// vectors per lane per row: P * M loads in flight per lane, no guards but the last rows.
template <int G, int P, int M, class Red, class T, class O>
__global__ void __launch_bounds__(kBlock, min_blocks<typename Red::State>())
short_rows_kernel(Red red, Geometry g, const T* in, O* out) {
  using State = typename Red::State;
  constexpr int V = vec_of<T>();
  constexpr int GPB = kBlock / G;
  const int lane = threadIdx.x % G;
  const int64_t k0 = (int64_t(blockIdx.x) * GPB + threadIdx.x / G) * M;  // the group's first row
  const int64_t rs = g.kept_in[0];
  Pack<T, V> v[M][P];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const Pack<T, V>* row = reinterpret_cast<const Pack<T, V>*>(in + (k0 + m) * rs);
    if (k0 + m < g.K) {
#pragma unroll
      for (int i = 0; i < P; ++i) v[m][i] = row[lane + i * G];
    }
  }
  State s[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    s[m] = red.init();
    if (k0 + m < g.K) {
      T x[P * V];
#pragma unroll
      for (int i = 0; i < P; ++i)
#pragma unroll
        for (int e = 0; e < V; ++e) x[i * V + e] = v[m][i].v[e];
      fold_n<true>(red, s[m], x, [&](int j) { return int64_t(lane + (j / V) * G) * V + j % V; });
    }
  }
  if constexpr (M == G && G > 1) {
    // Transposed butterfly: at step h, lanes with bit h keep the upper half of their rows and
    // send the lower half (the partner the reverse); the lower lane's partial comes first in
    // each merge. After log2(G) steps lane l holds row l's total in s[0].
#pragma unroll
    for (int h = G / 2; h >= 1; h /= 2) {
      const bool upper = (lane & h) != 0;
#pragma unroll
      for (int j = 0; j < h; ++j) {
        const State send = upper ? s[j] : s[j + h];
        State keep = upper ? s[j + h] : s[j];
        State recv = shfl_xor_state(send, h);
        if (upper) {
          red.merge(recv, keep);
          s[j] = recv;
        } else {
          red.merge(keep, recv);
          s[j] = keep;
        }
      }
    }
    const int64_t k = k0 + lane;
    if (k < g.K) put_out(red, out, k * g.kept_out[0], s[0], g.R);
  } else {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      group_merge<G>(red, s[m]);
      if (lane == 0 && k0 + m < g.K) put_out(red, out, (k0 + m) * g.kept_out[0], s[m], g.R);
    }
  }
}

// ---- columns ---------------------------------------------------------------------------------
// Block (256 / WY, WY): x along the kept axis (V outputs per thread), y row slices. Thread
// (x, y) folds rows r0 + y, r0 + y + WY, ... (kU loads in flight), then the WY slices merge in
// order in shared memory.
template <int V, class Red, class T, class O>
__global__ void __launch_bounds__(kBlock, min_blocks<typename Red::State>())
columns_kernel(Red red, Geometry g, int64_t rows_per_split, const T* in, O* out, typename Red::State* partial) {
  using State = typename Red::State;
  __shared__ State part[kBlock];
  const int bx = blockDim.x, wy = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
  const int64_t k = (int64_t(blockIdx.x) * bx + tx) * V;  // first of this thread's V outputs
  State s[V];
#pragma unroll
  for (int v = 0; v < V; ++v) s[v] = red.init();
  int64_t ib = 0, ob = 0;
  if (k < g.K) {
    kept_offsets(g, k, ib, ob);
    const int64_t r0 = int64_t(blockIdx.y) * rows_per_split;
    const int64_t r1 = std::min(g.R, r0 + rows_per_split);
    int64_t r = r0 + ty;
    if (g.nred == 1) {
      // One reduced dim: rows at a fixed stride, kU loads in flight.
      const int64_t rs = g.red_in[0], step = rs * wy;
      for (; r + int64_t(kU - 1) * wy < r1; r += int64_t(kU) * wy) {
        const T* p = in + ib + r * rs;
        Pack<T, V> x[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u) x[u] = *reinterpret_cast<const Pack<T, V>*>(p + u * step);
#pragma unroll
        for (int v = 0; v < V; ++v) {
          T col[kU];
#pragma unroll
          for (int u = 0; u < kU; ++u) col[u] = x[u].v[v];
          fold_n<false>(red, s[v], col, [&](int j) { return (r + int64_t(j) * wy) * g.red_idx[0]; });
        }
      }
      if (r < r1) {  // fewer than kU rows left for this thread: one guarded batch
        const T* p = in + ib + r * rs;
        Pack<T, V> x[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u)
          if (r + int64_t(u) * wy < r1) x[u] = *reinterpret_cast<const Pack<T, V>*>(p + u * step);
#pragma unroll
        for (int u = 0; u < kU; ++u)
          if (r + int64_t(u) * wy < r1) {
#pragma unroll
            for (int v = 0; v < V; ++v) red.add(s[v], x[u].v[v], (r + int64_t(u) * wy) * g.red_idx[0]);
          }
      }
    } else {
      // Several reduced dims: offsets by division, two rows in flight.
      for (; r < r1; r += 2 * int64_t(wy)) {
        Pack<T, V> x[2];
        int64_t idx[2];
#pragma unroll
        for (int u = 0; u < 2; ++u)
          if (r + int64_t(u) * wy < r1)
            x[u] = *reinterpret_cast<const Pack<T, V>*>(in + ib + red_offset<Red::kIndex>(g, r + int64_t(u) * wy, idx[u]));
#pragma unroll
        for (int u = 0; u < 2; ++u)
          if (r + int64_t(u) * wy < r1) {
#pragma unroll
            for (int v = 0; v < V; ++v) red.add(s[v], x[u].v[v], idx[u]);
          }
      }
    }
  }
  // Merge the WY row slices in order, one output of the V at a time (shared memory for any
  // state size).
#pragma unroll
  for (int v = 0; v < V; ++v) {
    if (wy > 1) {
      part[ty * bx + tx] = s[v];
      __syncthreads();
    }
    if (ty == 0 && k < g.K) {
      State t = s[v];
      for (int y = 1; y < wy; ++y) red.merge(t, part[y * bx + tx]);
      if (gridDim.y == 1) put_out(red, out, ob + v * g.kept_out[0], t, g.R);
      else partial[int64_t(blockIdx.y) * g.K + k + v] = t;
    }
    if (wy > 1) __syncthreads();
  }
}

// ---- finish: merge the splits of each output in order --------------------------------------------
// rows / strided partials (k * splits + i): a group of G threads per output, 8 loads in flight.
template <int G, class Red, class O>
__global__ void __launch_bounds__(kBlock)
finish_rows_kernel(Red red, Geometry g, int splits, const typename Red::State* partial, O* out) {
  using State = typename Red::State;
  const int64_t k = int64_t(blockIdx.x) * (kBlock / G) + threadIdx.x / G;
  const int lane = threadIdx.x % G;
  State s = red.init();
  if (k < g.K) {
    const State* pk = partial + k * splits;
    for (int i = lane; i < splits; i += 8 * G) {
      State t[8];
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (i + u * G < splits) t[u] = pk[i + u * G];
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (i + u * G < splits) red.merge(s, t[u]);
    }
  }
  group_merge<G>(red, s);
  if (lane == 0 && k < g.K) {
    int64_t ib, ob;
    kept_offsets(g, k, ib, ob);
    put_out(red, out, ob, s, g.R);
  }
}

// columns partials (i * K + k): a thread per output, coalesced along k, splits in order.
template <class Red, class O>
__global__ void __launch_bounds__(kBlock)
finish_cols_kernel(Red red, Geometry g, int splits, const typename Red::State* partial, O* out) {
  using State = typename Red::State;
  const int64_t k = int64_t(blockIdx.x) * kBlock + threadIdx.x;
  if (k >= g.K) return;
  State s = red.init();
  for (int i = 0; i < splits; i += 8) {
    State t[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      if (i + u < splits) t[u] = partial[int64_t(i + u) * g.K + k];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      if (i + u < splits) red.merge(s, t[u]);
  }
  int64_t ib, ob;
  kept_offsets(g, k, ib, ob);
  put_out(red, out, ob, s, g.R);
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

template <int P, class Red, class T, class O>
void launch_short_p(const Red& red, const RedLaunch& L, cudaStream_t st) {
  constexpr int G = 8, M = 8 / P;
  short_rows_kernel<G, P, M, Red, T, O><<<blocks_for(L.g.K, (kBlock / G) * M), kBlock, 0, st>>>(
      red, L.g, static_cast<const T*>(L.in), static_cast<O*>(L.out));
  check_launch("reduction short_rows_kernel");
}

template <class Red, class T, class O>
void launch_short(const Red& red, const RedLaunch& L, cudaStream_t st) {
  switch (L.short_p) {
    case 1: return launch_short_p<1, Red, T, O>(red, L, st);
    case 2: return launch_short_p<2, Red, T, O>(red, L, st);
    case 4: return launch_short_p<4, Red, T, O>(red, L, st);
    default: return launch_short_p<8, Red, T, O>(red, L, st);
  }
}

template <class Red>
void launch_reduction(const Red& red, const RedLaunch& L, cudaStream_t st) {
  using State = typename Red::State;
  using T = typename Red::In;
  using O = typename Red::Out;
  if (L.g.K == 0) return;
  State* partial = static_cast<State*>(L.workspace);
  constexpr int V = vec_of<T>();
  if (L.path == baracuda::reduction::Path::Columns) {
    // Vectors need every address this thread reads to be V-element aligned: the base pointer,
    // and (checked at select) the strides; fall back to V = 1 otherwise.
    const bool vec_ok = L.vec == V && reinterpret_cast<uintptr_t>(L.in) % alignof(Pack<T, V>) == 0;
    const int64_t rows = L.splits > 1 ? L.seg : std::max<int64_t>(L.g.R, 1);
    const int wy = (L.wy == 1 || L.wy == 2 || L.wy == 4 || L.wy == 8) ? L.wy : 8;
    const dim3 block(kBlock / wy, wy);
    if (vec_ok) {
      const dim3 grid(blocks_for(L.g.K / V, block.x), unsigned(L.splits));
      columns_kernel<V, Red, T, O><<<grid, block, 0, st>>>(red, L.g, rows, static_cast<const T*>(L.in),
                                                            static_cast<O*>(L.out), partial);
    } else {
      const dim3 grid(blocks_for(L.g.K, block.x), unsigned(L.splits));
      columns_kernel<1, Red, T, O><<<grid, block, 0, st>>>(red, L.g, rows, static_cast<const T*>(L.in),
                                                            static_cast<O*>(L.out), partial);
    }
    check_launch("reduction columns_kernel");
    if (L.splits > 1) {
      finish_cols_kernel<Red, O><<<blocks_for(L.g.K, kBlock), kBlock, 0, st>>>(red, L.g, L.splits, partial,
                                                                              static_cast<O*>(L.out));
      check_launch("reduction finish_cols_kernel");
    }
    return;
  }
  if (L.path == baracuda::reduction::Path::Rows) {
    // Short rows need every row start 16-byte aligned: strides and R at select, the base here.
    if (L.short_p > 0 && reinterpret_cast<uintptr_t>(L.in) % alignof(Pack<T, V>) == 0)
      return launch_short<Red, T, O>(red, L, st);
    launch_rows<true, Red, T, O>(red, L, st);
  } else {
    launch_rows<false, Red, T, O>(red, L, st);
  }
  if (L.splits > 1) {
    if (L.fgroup >= kBlock)
      finish_rows_kernel<kBlock, Red, O><<<blocks_for(L.g.K, 1), kBlock, 0, st>>>(red, L.g, L.splits, partial,
                                                                                 static_cast<O*>(L.out));
    else
      finish_rows_kernel<32, Red, O><<<blocks_for(L.g.K, kBlock / 32), kBlock, 0, st>>>(red, L.g, L.splits, partial,
                                                                                       static_cast<O*>(L.out));
    check_launch("reduction finish_kernel");
  }
}

}  // namespace baracuda::reduction::kern
