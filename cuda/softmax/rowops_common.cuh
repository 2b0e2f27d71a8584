// What the gumbel-softmax and sparsemax row kernels share: row geometry over any strides,
// 4-element chunks of a row, and fixed-order reductions over a warp or a block per row.
//
// A row is processed by a "team": a warp (RowPath::Warp, 8 rows per 256-thread block) or a
// whole block (Block / Global). Lane t of a team of n owns the chunks c = t, t + n, ...; chunk c
// covers the row elements [4c, 4c + 4). Every reduction is a shuffle tree plus, for a block, an
// in-order fold of the per-warp partials: deterministic and bit-stable for a given plan.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "softmax/rowops_launch.h"

namespace baracuda::softmax::rowops {
using namespace baracuda::kernels;

struct Geo {
  int64_t rows = 0, len = 0;
  int nd = 0;
  int64_t dims[kMaxRank] = {};
  int64_t st[4][kMaxRank] = {};
  int64_t ax[4] = {1, 1, 1, 1};
};

inline Geo geo_of(const RowOpLaunch& L) {
  Geo g;
  g.rows = L.rows;
  g.len = L.len;
  g.nd = L.nd;
  for (int d = 0; d < L.nd; ++d) {
    g.dims[d] = L.dims[d];
    for (int a = 0; a < 4; ++a) g.st[a][d] = L.stride[a][d];
  }
  for (int a = 0; a < 4; ++a) g.ax[a] = L.axis_stride[a];
  return g;
}

// Element offsets of the first element of `row` for the four operand slots (one index
// decomposition per row; a row is a team's whole work, so this is cheap).
__device__ __forceinline__ void row_offsets(const Geo& g, int64_t r, int64_t (&o)[4]) {
  o[0] = o[1] = o[2] = o[3] = 0;
  for (int d = g.nd - 1; d >= 0; --d) {
    const int64_t q = r / g.dims[d], i = r - q * g.dims[d];
    r = q;
#pragma unroll
    for (int a = 0; a < 4; ++a) o[a] += i * g.st[a][d];
  }
}

template <class C> __device__ __forceinline__ C ninf() { return -std::numeric_limits<C>::infinity(); }
template <class C> __device__ __forceinline__ C qnan() { return std::numeric_limits<C>::quiet_NaN(); }
// max that lets NaN win (a NaN row must stay NaN).
template <class C> __device__ __forceinline__ C nmax(C a, C b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }

// Chunk loads / stores along an axis of stride `ax`; slots at or past `len` get `fill` / are skipped.
// A whole chunk of a unit-stride row at an aligned address moves as one vector (8 bytes for half
// types, 16 for f32, 2 x 16 for f64).
template <class T> struct alignas(4 * sizeof(T)) Pack4 { T v[4]; };
template <class T> __device__ __forceinline__ bool vec_ok(const T* p, int64_t ax, int64_t i0, int64_t len) {
  return ax == 1 && i0 + 4 <= len && (reinterpret_cast<uintptr_t>(p + i0) % (4 * sizeof(T))) == 0;
}
template <class T, class C>
__device__ __forceinline__ void load4(const T* __restrict__ p, int64_t ax, int64_t i0, int64_t len, C (&v)[4], C fill) {
  if (vec_ok(p, ax, i0, len)) {
    const Pack4<T> pk = *reinterpret_cast<const Pack4<T>*>(p + i0);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = C(to_compute(pk.v[j]));
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = i0 + j < len ? C(to_compute(p[(i0 + j) * ax])) : fill;
}
template <class T, class C>
__device__ __forceinline__ void store4(T* __restrict__ p, int64_t ax, int64_t i0, int64_t len, const C (&v)[4]) {
  if (vec_ok(p, ax, i0, len)) {
    Pack4<T> pk;
#pragma unroll
    for (int j = 0; j < 4; ++j) pk.v[j] = from_compute<T>(v[j]);
    *reinterpret_cast<Pack4<T>*>(p + i0) = pk;
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (i0 + j < len) p[(i0 + j) * ax] = from_compute<T>(v[j]);
}

// ---- team reductions ------------------------------------------------------------------------
// Shared scratch of a block team: 32 slots per reduced value.
template <class C> struct Scratch {
  C c[4][32];
  long long i[2][32];
};

template <class V> __device__ __forceinline__ V shfl_x(V v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }

// Sums NC compute values and NI integers over the team. Every lane gets the results.
template <bool WARP, int NC, int NI, class C>
__device__ __forceinline__ void team_sum(C (&c)[NC], long long (&n)[NI], Scratch<C>& sh) {
  auto warp_sum = [&] {  // butterfly: every lane gets the warp's sums
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
      for (int q = 0; q < NC; ++q) c[q] += shfl_x(c[q], o);
#pragma unroll
      for (int q = 0; q < NI; ++q) n[q] += shfl_x(n[q], o);
    }
  };
  warp_sum();
  if constexpr (!WARP) {
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();  // the previous reduction's readers are done with the slots
    if (l == 0) {
#pragma unroll
      for (int q = 0; q < NC; ++q) sh.c[q][w] = c[q];
#pragma unroll
      for (int q = 0; q < NI; ++q) sh.i[q][w] = n[q];
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < NC; ++q) c[q] = l < nw ? sh.c[q][l] : C(0);
#pragma unroll
    for (int q = 0; q < NI; ++q) n[q] = l < nw ? sh.i[q][l] : 0;
    warp_sum();
  }
}

template <bool WARP, class C> __device__ __forceinline__ C team_sum1(C v, Scratch<C>& sh) {
  C c[1] = {v};
  long long n[1] = {0};
  team_sum<WARP, 1, 1>(c, n, sh);
  return c[0];
}

template <bool WARP, class C> __device__ __forceinline__ C team_max(C v, Scratch<C>& sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = nmax(v, shfl_x(v, o));
  if constexpr (!WARP) {
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();
    if (l == 0) sh.c[0][w] = v;
    __syncthreads();
    v = l < nw ? sh.c[0][l] : ninf<C>();
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = nmax(v, shfl_x(v, o));
  }
  return v;
}

template <bool WARP, class C> __device__ __forceinline__ long long team_min_i(long long v, Scratch<C>& sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const long long u = shfl_x(v, o);
    v = u < v ? u : v;
  }
  if constexpr (!WARP) {
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();
    if (l == 0) sh.i[0][w] = v;
    __syncthreads();
    v = l < nw ? sh.i[0][l] : (long long)(~0ull >> 1);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const long long u = shfl_x(v, o);
      v = u < v ? u : v;
    }
  }
  return v;
}

// ---- the team of a row ----------------------------------------------------------------------
// WARP: 32 lanes per row, blockDim.x / 32 rows per block; else the block is the team.
template <bool WARP> struct Team {
  int lane, size;
  int64_t first, step;  // rows: first, first + step, ...
  __device__ __forceinline__ Team() {
    if constexpr (WARP) {
      const int wpb = blockDim.x >> 5;
      lane = threadIdx.x & 31;
      size = 32;
      first = int64_t(blockIdx.x) * wpb + (threadIdx.x >> 5);
      step = int64_t(gridDim.x) * wpb;
    } else {
      lane = threadIdx.x;
      size = blockDim.x;
      first = blockIdx.x;
      step = gridDim.x;
    }
  }
};

// The backward of a row op over gy (ax[1]) and its forward output y (ax[2]) into gx (ax[0]), in
// two passes over each row: pass 1 loads every 4-chunk of both (kept in registers when REG) into
// the op's statistic (`R::add`), `R::finish` reduces it over the team, pass 2 writes
// gx = `R::grad` chunk by chunk (re-reading the chunks when !REG). R: the op's per-row rule,
// reset at every row. The geometry by value: a reference to the kernel's parameter makes nvcc
// copy it to local memory first.
template <class T, bool WARP, int K, bool REG, class R>
__device__ __forceinline__ void row_backward(const Team<WARP>& tm, Geo g, T* gx, const T* gy, const T* y,
                                             R& rule, Scratch<compute_t<T>>& sh) {
  using C = compute_t<T>;
  const int64_t nch = (g.len + 3) / 4;
  const int nk = REG ? K : int((nch + tm.size - 1) / tm.size);
  for (int64_t row = tm.first; row < g.rows; row += tm.step) {
    int64_t o[4];
    row_offsets(g, row, o);
    const T* ar = gy + o[1];
    const T* br = y + o[2];
    C a[REG ? K : 1][4], b[REG ? K : 1][4];
    rule.reset();
#pragma unroll
    for (int k = 0; k < (REG ? K : nk); ++k) {
      const int64_t i0 = 4 * (int64_t(k) * tm.size + tm.lane);
      C(&ak)[4] = a[REG ? k : 0];
      C(&bk)[4] = b[REG ? k : 0];
      load4<T>(ar, g.ax[1], i0, g.len, ak, C(0));
      load4<T>(br, g.ax[2], i0, g.len, bk, C(0));
      rule.add(ak, bk);
    }
    rule.template finish<WARP>(sh);
    T* orow = gx + o[0];
#pragma unroll
    for (int k = 0; k < (REG ? K : nk); ++k) {
      const int64_t i0 = 4 * (int64_t(k) * tm.size + tm.lane);
      if (i0 >= g.len) continue;
      C(&ak)[4] = a[REG ? k : 0];
      C(&bk)[4] = b[REG ? k : 0];
      if constexpr (!REG) {
        load4<T>(ar, g.ax[1], i0, g.len, ak, C(0));
        load4<T>(br, g.ax[2], i0, g.len, bk, C(0));
      }
      C out[4];
      rule.grad(ak, bk, out);
      store4<T>(orow, g.ax[0], i0, g.len, out);
    }
  }
}

inline unsigned grid_of(int64_t blocks) {
  return unsigned(blocks < 1 ? 1 : (blocks > (int64_t(1) << 30) ? (int64_t(1) << 30) : blocks));
}
// Calls f(warp, k, reg) (std::integral_constant arguments) with the kernel geometry of the launch's
// path and chunks per lane: the instantiated (path, k) table every row op shares. Warp: k 1 / 2 /
// 4; Block: k 1 / 2 / 4 / 8 (f64: 1 / 2, its longer rows take Global); Global: the row re-read.
template <class T, class F> void for_row_geometry(const RowOpLaunch& L, F&& f) {
  using W = std::true_type;
  using B = std::false_type;
  using Reg = std::true_type;
  using Reread = std::false_type;
  switch (L.path) {
    case RowPath::Warp:
      if (L.k == 1) return f(W{}, std::integral_constant<int, 1>{}, Reg{});
      if (L.k == 2) return f(W{}, std::integral_constant<int, 2>{}, Reg{});
      return f(W{}, std::integral_constant<int, 4>{}, Reg{});
    case RowPath::Block:
      if (L.k == 1) return f(B{}, std::integral_constant<int, 1>{}, Reg{});
      if (L.k == 2) return f(B{}, std::integral_constant<int, 2>{}, Reg{});
      if constexpr (!std::is_same_v<T, double>) {
        if (L.k == 4) return f(B{}, std::integral_constant<int, 4>{}, Reg{});
        return f(B{}, std::integral_constant<int, 8>{}, Reg{});
      }
      [[fallthrough]];
    default:
      return f(B{}, std::integral_constant<int, 1>{}, Reread{});
  }
}

// Blocks for `rows` rows on the given path (a warp team takes 8 rows per 256-thread block).
inline unsigned row_grid(const RowOpLaunch& L) {
  const int64_t per = L.path == RowPath::Warp ? L.threads / 32 : 1;
  return grid_of((L.rows + per - 1) / per);
}

}  // namespace baracuda::softmax::rowops
