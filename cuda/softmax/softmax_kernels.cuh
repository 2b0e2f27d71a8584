// Softmax / log-softmax forward and backward kernels, templated on the storage type T.
// Half types load, compute and accumulate in f32 and round once; f64 in f64.
//
// Forward:  softmax y = exp(x - m) / s,  log_softmax y = x - m - log(s),
//           m = max(x), s = sum(exp(x - m)) over the reduced axis.
// Backward: softmax gx = y * (gy - sum(gy * y)),  log_softmax gx = gy - exp(y) * sum(gy).
//
// NaN anywhere in a row makes the whole row NaN, and so does +inf (x - m is NaN there), as in
// torch; a row of -inf only is NaN. Every reduction runs in a fixed order (deterministic).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "common/block_reduce.cuh"
#include "common/cluster_device.cuh"
#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/fast_exp.cuh"
#include "common/online_softmax.cuh"
#include "common/packed_vec.cuh"
#include "softmax/softmax_launch.h"

namespace baracuda::softmax::detail {
using namespace baracuda::kernels;

// What a softmax row finish needs of its (max, sum): r = 1 / s, and for 16-bit storage
// lg = log2(s), so that exp(v - m) / s is one FFMA and one MUFU.EX2 (softmax_value).
template <class T, class C> struct SoftmaxScale {
  C r, lg;
  __device__ __forceinline__ explicit SoftmaxScale(C s) : r(C(1) / s), lg(is_half_v<T> ? C(log2f(float(s))) : C(0)) {}
};
template <class T, class C> __device__ __forceinline__ C softmax_value(C v, C m, const SoftmaxScale<T, C>& sc) {
  if constexpr (is_half_v<T>) return ex2_ftz(fmaf(v - m, kLog2e, -sc.lg));
  else return xexp<T>(v - m) * sc.r;
}
// Folded exp for 16-bit storage: exp(v - m) as ex2(v log2e + c), c = -m log2e (and - log2(s)
// for an output), one FFMA + MUFU per element instead of FADD + FMUL / FFMA + MUFU. c is rounded
// once; while |m| <= kFoldMax (|c| < 2^9) that is at most 2^-16 in the exponent, ~1e-5 relative
// in the result, against a 16-bit half ulp of 2^-9 / 2^-12. Larger |m| takes the exact form
// (the cancellation in v log2e + c would then cost more than that).
constexpr float kFoldMax = 256.f;
template <class T, class C> __device__ __forceinline__ bool can_fold(C m) {
  if constexpr (is_half_v<T>) return fabsf(m) <= kFoldMax;
  else return false;
}
__device__ __forceinline__ float exp_folded(float v, float c) { return ex2_ftz(fmaf(v, kLog2e, c)); }
// Calls go(e) once, with e(v) = exp(v - m): folded where fold_ok and can_fold allow, else exact.
template <class T, class C, class Go> __device__ __forceinline__ void with_exp_from(C m, bool fold_ok, Go&& go) {
  if constexpr (is_half_v<T>) {
    if (fold_ok && can_fold<T>(m)) {
      const float c = -m * kLog2e;
      go([c](float v) { return exp_folded(v, c); });
      return;
    }
  }
  go([m](C v) { return xexp<T>(v - m); });
}

// ---- geometry ------------------------------------------------------------------------------
// Rows of up to two merged outer dims: offset(row) = (row / d1) * s0 + (row % d1) * s1.
struct RowGeo {
  int64_t rows = 0, len = 0, d1 = 1;
  int64_t s0[3] = {}, s1[3] = {};
  int64_t ax[3] = {1, 1, 1};  // axis strides (Columns / Loop paths)
};
__device__ __forceinline__ int64_t row_off(const RowGeo& g, int64_t row, int a) {
  if (g.d1 == 1) return row * g.s0[a];
  const int64_t q = row / g.d1;
  return q * g.s0[a] + (row - q * g.d1) * g.s1[a];
}
struct NdGeo {
  int64_t rows = 0, len = 0;
  int nd = 0;
  int64_t dims[kMaxRank] = {};
  int64_t st[3][kMaxRank] = {};
  int64_t ax[3] = {1, 1, 1};
};


// ---- short rows in registers: a group of G lanes per row, R rows per group ------------------
// Chunk k of lane l covers elements [(k * G + l) * V, + V) of its row. A warp holds RPW = 32 / G
// consecutive rows at a time, R such sets one after another (rows row0 + r * RPW): each load
// instruction of the warp still covers RPW whole rows, a lane issues all R x K of its 16-byte loads
// before it reduces anything, and the per-row setup (row address, shuffles, 1 / sum) is shared
// by R rows (ncu on the H100, 64-element bf16 rows: issue-active 0.63 -> 0.50 at R = 4).
template <int G, int R> struct WarpRows {
  static constexpr int kRpw = 32 / G;
  int64_t row0;
  int l;
  __device__ __forceinline__ WarpRows() {
    const int lane = threadIdx.x & 31;
    l = lane % G;
    row0 = ((int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5) * (kRpw * R) + lane / G;
  }
  __device__ __forceinline__ int64_t row(int r) const { return row0 + int64_t(r) * kRpw; }
  // Element offsets of the R rows in operand a; one 64-bit multiply when the rows are evenly strided.
  __device__ __forceinline__ void offsets(const RowGeo& g, int a, int64_t (&off)[R]) const {
    if (g.d1 == 1) {
      const int64_t base = row0 * g.s0[a], step = int64_t(kRpw) * g.s0[a];
#pragma unroll
      for (int r = 0; r < R; ++r) off[r] = base + r * step;
    } else {
#pragma unroll
      for (int r = 0; r < R; ++r) off[r] = row_off(g, row(r), a);
    }
  }
  // Loads chunk k of each row into v[r][k]; rows past the end get `fill` (and read nothing).
  template <class T, int V, int K, class C>
  __device__ __forceinline__ void load(const RowGeo& g, const T* __restrict__ p, const int64_t (&off)[R],
                                       C (&v)[R][K][V], C fill) const {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t idx = row(r) < g.rows ? (int64_t(k) * G + l) * V : g.len;
        load_chunk<T, V>(p + off[r], idx, g.len, v[r][k], fill);
      }
  }
  template <class T, int V, int K, class C>
  __device__ __forceinline__ void store(const RowGeo& g, T* __restrict__ p, const int64_t (&off)[R],
                                        const C (&v)[R][K][V]) const {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (row(r) >= g.rows) continue;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t idx = (int64_t(k) * G + l) * V;
        if (idx < g.len) store_chunk<T, V>(p + off[r], idx, g.len, v[r][k]);
      }
    }
  }
};

// 1 / s and log(s) of a row's sum s (>= 1 unless NaN): for 16-bit storage the MUFU forms (their
// error, ~2^-22 relative, is far below a 16-bit ulp; the IEEE divide and libm log are ~10 and
// ~20 instructions per row and lane, which a 64-element row's 8 elements per lane do not amortize).
template <class T, class C> __device__ __forceinline__ C recip_of_sum(C s) {
  if constexpr (is_half_v<T>) return rcp_approx_ftz(s);
  else return C(1) / s;
}
template <class T, class C> __device__ __forceinline__ C log_of_sum(C s) {
  if constexpr (is_half_v<T>) return log_approx_ftz(s);
  else return xlog(s);
}

template <class T, int V, int K, class C>
__device__ __forceinline__ void fwd_finish(C (&v)[K][V], C m, C s, bool log) {
  if (log) {
    const C ls = log_of_sum<T>(s);
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) v[k][j] = (v[k][j] - m) - ls;
  } else {
    const C r = recip_of_sum<T>(s);
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) v[k][j] *= r;
  }
}

template <class T, int V, int K, int G, int R>
__global__ void __launch_bounds__(256) rows_warp_fwd(RowGeo g, T* __restrict__ out, const T* __restrict__ x, bool log,
                                                     bool fold_ok) {
  using C = compute_t<T>;
  const WarpRows<G, R> wr;
  int64_t off[R];
  wr.offsets(g, 1, off);
  C v[R][K][V];
  wr.template load<T, V, K>(g, x, off, v, ninf<C>());
  C m[R], s[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = ninf<C>();
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) m[r] = cmax(m[r], v[r][k][j]);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) m[r] = group_max<G>(m[r]);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    // sum exp(v - m), keeping the exps for softmax (log-softmax keeps v); one loop per case under
    // uniform branches (a select per element issued both), the exp folded where |m| allows.
    C sr = 0;
    auto sum_exp = [&](auto keep, auto&& e) {
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const C ev = e(v[r][k][j]);
          sr += ev;
          if constexpr (decltype(keep)::value) v[r][k][j] = ev;
        }
    };
    auto sum_with = [&](auto&& e) {
      if (log) sum_exp(std::false_type{}, e);
      else sum_exp(std::true_type{}, e);
    };
    with_exp_from<T>(m[r], fold_ok, sum_with);
    s[r] = sr;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) s[r] = group_sum<G>(s[r]);
#pragma unroll
  for (int r = 0; r < R; ++r) fwd_finish<T, V, K>(v[r], m[r], s[r], log);
  int64_t ooff[R];
  wr.offsets(g, 0, ooff);
  wr.template store<T, V, K>(g, out, ooff, v);
}

template <class T, int V, int K, class C>
__device__ __forceinline__ C bwd_dot(const C (&a)[K][V], const C (&b)[K][V], bool log) {
  C d = 0;
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int j = 0; j < V; ++j) d += log ? a[k][j] : a[k][j] * b[k][j];
  return d;
}
template <class T, int V, int K, class C>
__device__ __forceinline__ void bwd_finish(C (&a)[K][V], const C (&b)[K][V], C dot, bool log) {
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int j = 0; j < V; ++j) a[k][j] = log ? a[k][j] - xexp<T>(b[k][j]) * dot : b[k][j] * (a[k][j] - dot);
}

template <class T, int V, int K, int G, int R>
__global__ void __launch_bounds__(256) rows_warp_bwd(RowGeo g, T* __restrict__ gx, const T* __restrict__ gy,
                                                     const T* __restrict__ y, bool log) {
  using C = compute_t<T>;
  const WarpRows<G, R> wr;
  int64_t off[R];
  C a[R][K][V], b[R][K][V];
  wr.offsets(g, 1, off);
  wr.template load<T, V, K>(g, gy, off, a, C(0));
  wr.offsets(g, 2, off);
  wr.template load<T, V, K>(g, y, off, b, C(0));
  C dot[R];
#pragma unroll
  for (int r = 0; r < R; ++r) dot[r] = bwd_dot<T, V, K>(a[r], b[r], log);
#pragma unroll
  for (int r = 0; r < R; ++r) dot[r] = group_sum<G>(dot[r]);
#pragma unroll
  for (int r = 0; r < R; ++r) bwd_finish<T, V, K>(a[r], b[r], dot[r], log);
  wr.offsets(g, 0, off);
  wr.template store<T, V, K>(g, gx, off, a);
}

// ---- long rows: a block per row, online (max, sum) pass, then a write pass in reverse chunk
// order (the most recently read part of the row is the likeliest still in L2) -----------------
constexpr int kOnlineUnroll = 4;

template <class T, int V>
__global__ void __launch_bounds__(1024) rows_online_fwd(RowGeo g, T* __restrict__ out, const T* __restrict__ x, bool log) {
  using C = compute_t<T>;
  __shared__ C shm[32], shs[32];
  const int n = blockDim.x, t = threadIdx.x;
  const int64_t nch = (g.len + V - 1) / V;
  for (int64_t row = blockIdx.x; row < g.rows; row += gridDim.x) {
    const T* xr = x + row_off(g, row, 1);
    C m = ninf<C>(), s = 0;
    for (int64_t c0 = t; c0 < nch; c0 += int64_t(n) * kOnlineUnroll) {
      C v[kOnlineUnroll][V];
#pragma unroll
      for (int u = 0; u < kOnlineUnroll; ++u) {
        const int64_t c = c0 + int64_t(u) * n;
        load_chunk<T, V>(xr, c < nch ? c * V : g.len, g.len, v[u], ninf<C>());
      }
#pragma unroll
      for (int u = 0; u < kOnlineUnroll; ++u) {
        C cm = ninf<C>();
#pragma unroll
        for (int j = 0; j < V; ++j) cm = cmax(cm, v[u][j]);
        C cs = 0;
#pragma unroll
        for (int j = 0; j < V; ++j) cs += (v[u][j] == cm && cm == ninf<C>()) ? C(0) : xexp<T>(v[u][j] - cm);
        if (cm != ninf<C>() || cs != C(0)) combine<T>(m, s, cm, cs);
      }
    }
    block_combine<T>(m, s, shm, shs);
    poison_inf(m, s);
    if (m == ninf<C>()) s = std::numeric_limits<C>::quiet_NaN();  // nothing but -inf: NaN, as torch
    const SoftmaxScale<T, C> sc(s);
    const C ls = xlog(s);
    T* orow = out + row_off(g, row, 0);
    const int64_t last = nch - 1 - t;
    for (int64_t c = last; c >= 0; c -= n) {
      C v[V];
      load_chunk<T, V>(xr, c * V, g.len, v, C(0));
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] = log ? (v[j] - m) - ls : softmax_value(v[j], m, sc);
      store_chunk<T, V>(orow, c * V, g.len, v);
    }
  }
}

template <class T, int V>
__global__ void __launch_bounds__(1024) rows_online_bwd(RowGeo g, T* __restrict__ gx, const T* __restrict__ gy,
                                                        const T* __restrict__ y, bool log) {
  using C = compute_t<T>;
  __shared__ C sh[32];
  const int n = blockDim.x, t = threadIdx.x;
  const int64_t nch = (g.len + V - 1) / V;
  for (int64_t row = blockIdx.x; row < g.rows; row += gridDim.x) {
    const T* gr = gy + row_off(g, row, 1);
    const T* yr = y + row_off(g, row, 2);
    C d = 0;
    for (int64_t c0 = t; c0 < nch; c0 += int64_t(n) * kOnlineUnroll) {
      C a[kOnlineUnroll][V], b[kOnlineUnroll][V];
#pragma unroll
      for (int u = 0; u < kOnlineUnroll; ++u) {
        const int64_t c = c0 + int64_t(u) * n;
        const int64_t idx = c < nch ? c * V : g.len;
        load_chunk<T, V>(gr, idx, g.len, a[u], C(0));
        if (!log) load_chunk<T, V>(yr, idx, g.len, b[u], C(0));
      }
#pragma unroll
      for (int u = 0; u < kOnlineUnroll; ++u)
#pragma unroll
        for (int j = 0; j < V; ++j) d += log ? a[u][j] : a[u][j] * b[u][j];
    }
    d = block_sum(d, sh);
    T* orow = gx + row_off(g, row, 0);
    for (int64_t c = nch - 1 - t; c >= 0; c -= n) {
      C a[V], b[V];
      load_chunk<T, V>(gr, c * V, g.len, a, C(0));
      load_chunk<T, V>(yr, c * V, g.len, b, C(0));
#pragma unroll
      for (int j = 0; j < V; ++j) a[j] = log ? a[j] - xexp<T>(b[j]) * d : b[j] * (a[j] - d);
      store_chunk<T, V>(orow, c * V, g.len, a);
    }
  }
}

// ---- any alignment, reduced axis strided or not: a warp per row (Loop) ---------------------
template <class T>
__global__ void __launch_bounds__(256) rows_loop_fwd(RowGeo g, T* __restrict__ out, const T* __restrict__ x, bool log) {
  using C = compute_t<T>;
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < g.rows; row += warps) {
    const T* xr = x + row_off(g, row, 1);
    C m = ninf<C>(), s = 0;
    for (int64_t i = lane; i < g.len; i += 32) online_add<T>(m, s, to_compute(xr[i * g.ax[1]]));
    group_combine<32, T>(m, s);
    poison_inf(m, s);
    const SoftmaxScale<T, C> sc(s);
    const C ls = xlog(s);
    T* orow = out + row_off(g, row, 0);
    for (int64_t i = lane; i < g.len; i += 32) {
      const C v = to_compute(xr[i * g.ax[1]]);
      orow[i * g.ax[0]] = from_compute<T>(log ? (v - m) - ls : softmax_value(v, m, sc));
    }
  }
}
template <class T>
__global__ void __launch_bounds__(256) rows_loop_bwd(RowGeo g, T* __restrict__ gx, const T* __restrict__ gy,
                                                     const T* __restrict__ y, bool log) {
  using C = compute_t<T>;
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < g.rows; row += warps) {
    const T* gr = gy + row_off(g, row, 1);
    const T* yr = y + row_off(g, row, 2);
    C d = 0;
    for (int64_t i = lane; i < g.len; i += 32) {
      const C a = to_compute(gr[i * g.ax[1]]);
      d += log ? a : a * to_compute(yr[i * g.ax[2]]);
    }
    d = group_sum<32>(d);
    T* orow = gx + row_off(g, row, 0);
    for (int64_t i = lane; i < g.len; i += 32) {
      const C a = to_compute(gr[i * g.ax[1]]), b = to_compute(yr[i * g.ax[2]]);
      orow[i * g.ax[0]] = from_compute<T>(log ? a - xexp<T>(b) * d : b * (a - d));
    }
  }
}

// ---- reduced axis strided: a thread per row (neighbouring threads, neighbouring columns) ----
template <bool ND> __device__ __forceinline__ void col_offsets(const RowGeo& g2, const NdGeo& gn, int64_t r,
                                                               int64_t (&o)[3]) {
  if constexpr (!ND) {
#pragma unroll
    for (int a = 0; a < 3; ++a) o[a] = row_off(g2, r, a);
  } else {
    o[0] = o[1] = o[2] = 0;
    for (int d = gn.nd - 1; d >= 0; --d) {
      const int64_t q = r / gn.dims[d], i = r - q * gn.dims[d];
      r = q;
#pragma unroll
      for (int a = 0; a < 3; ++a) o[a] += i * gn.st[a][d];
    }
  }
}

template <class T, bool ND>
__global__ void __launch_bounds__(256) cols_fwd(RowGeo g2, NdGeo gn, T* __restrict__ out, const T* __restrict__ x,
                                                bool log) {
  using C = compute_t<T>;
  const int64_t rows = ND ? gn.rows : g2.rows, len = ND ? gn.len : g2.len;
  const int64_t ax = ND ? gn.ax[1] : g2.ax[1], ao = ND ? gn.ax[0] : g2.ax[0];
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    int64_t o[3];
    col_offsets<ND>(g2, gn, r, o);
    const T* xr = x + o[1];
    C m = ninf<C>(), s = 0;
#pragma unroll 4
    for (int64_t i = 0; i < len; ++i) online_add<T>(m, s, to_compute(xr[i * ax]));
    poison_inf(m, s);
    const SoftmaxScale<T, C> sc(s);
    const C ls = xlog(s);
    T* orow = out + o[0];
#pragma unroll 4
    for (int64_t i = 0; i < len; ++i) {
      const C v = to_compute(xr[i * ax]);
      orow[i * ao] = from_compute<T>(log ? (v - m) - ls : softmax_value(v, m, sc));
    }
  }
}

template <class T, bool ND>
__global__ void __launch_bounds__(256) cols_bwd(RowGeo g2, NdGeo gn, T* __restrict__ gx, const T* __restrict__ gy,
                                                const T* __restrict__ y, bool log) {
  using C = compute_t<T>;
  const int64_t rows = ND ? gn.rows : g2.rows, len = ND ? gn.len : g2.len;
  const int64_t a0 = ND ? gn.ax[0] : g2.ax[0], a1 = ND ? gn.ax[1] : g2.ax[1], a2 = ND ? gn.ax[2] : g2.ax[2];
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    int64_t o[3];
    col_offsets<ND>(g2, gn, r, o);
    const T* gr = gy + o[1];
    const T* yr = y + o[2];
    C d = 0;
#pragma unroll 4
    for (int64_t i = 0; i < len; ++i) {
      const C a = to_compute(gr[i * a1]);
      d += log ? a : a * to_compute(yr[i * a2]);
    }
    T* orow = gx + o[0];
#pragma unroll 4
    for (int64_t i = 0; i < len; ++i) {
      const C a = to_compute(gr[i * a1]), b = to_compute(yr[i * a2]);
      orow[i * a0] = from_compute<T>(log ? a - xexp<T>(b) * d : b * (a - d));
    }
  }
}

// ---- the launcher ---------------------------------------------------------------------------
inline RowGeo row_geo(const SmLaunch& L) {
  RowGeo g;
  g.rows = L.rows;
  g.len = L.len;
  for (int a = 0; a < 3; ++a) {
    g.ax[a] = L.axis_stride[a];
    if (L.nd == 1) g.s0[a] = L.stride[a][0];
    if (L.nd == 2) {
      g.s0[a] = L.stride[a][0];
      g.s1[a] = L.stride[a][1];
    }
  }
  g.d1 = L.nd == 2 ? L.dims[1] : 1;
  return g;
}

inline unsigned grid_of(int64_t blocks) {
  return unsigned(blocks < 1 ? 1 : (blocks > (int64_t(1) << 30) ? (int64_t(1) << 30) : blocks));
}

template <class T, int V, int K, int G, int R>
void warp_launch(const SmLaunch& L, const RowGeo& g, cudaStream_t st) {
  constexpr int kThreads = 256, RPB = (kThreads / 32) * (32 / G) * R;
  const unsigned blocks = grid_of((L.rows + RPB - 1) / RPB);
  const bool log = is_log(L.op);
  if (is_backward(L.op))
    rows_warp_bwd<T, V, K, G, R><<<blocks, kThreads, 0, st>>>(g, static_cast<T*>(L.out), static_cast<const T*>(L.in0),
                                                              static_cast<const T*>(L.in1), log);
  else
    rows_warp_fwd<T, V, K, G, R><<<blocks, kThreads, 0, st>>>(g, static_cast<T*>(L.out), static_cast<const T*>(L.in0),
                                                              log, L.fold_exp);
  check_launch("softmax rows_warp");
}
// Rows per lane group (L.rows_per_group): 1, 2 or 4 where a lane holds one chunk per operand
// (K = 1), 1 or 2 at K = 2, 1 at K = 4 (64 bytes per operand and lane already in flight).
template <class T, int V, int K, int G>
void warp_launch_r(const SmLaunch& L, const RowGeo& g, cudaStream_t st) {
  if constexpr (K == 1)
    if (L.rows_per_group == 4) return warp_launch<T, V, K, G, 4>(L, g, st);
  if constexpr (K <= 2)
    if (L.rows_per_group == 2) return warp_launch<T, V, K, G, 2>(L, g, st);
  return warp_launch<T, V, K, G, 1>(L, g, st);
}

// rows_block / rows_cluster: softmax_reg.cuh, instantiated in softmax_reg_<dtype>_{fwd,bwd}.cu.
template <class T, bool BWD> void launch_reg(const SmLaunch& L, const RowGeo& g, cudaStream_t st);

template <class T>
void launch_typed(const SmLaunch& L, cudaStream_t st) {
  using kernels::compute_t;
  constexpr int V = int(16 / sizeof(T));
  const RowGeo g = row_geo(L);
  const bool log = is_log(L.op), bwd = is_backward(L.op);
  T* out = static_cast<T*>(L.out);
  const T* in0 = static_cast<const T*>(L.in0);
  const T* in1 = static_cast<const T*>(L.in1);
  switch (L.path) {
    case SmPath::RowsWarp:
      if (L.k == 1) {
        switch (L.group) {
          case 1: return warp_launch_r<T, V, 1, 1>(L, g, st);
          case 2: return warp_launch_r<T, V, 1, 2>(L, g, st);
          case 4: return warp_launch_r<T, V, 1, 4>(L, g, st);
          case 8: return warp_launch_r<T, V, 1, 8>(L, g, st);
          case 16: return warp_launch_r<T, V, 1, 16>(L, g, st);
          default: return warp_launch_r<T, V, 1, 32>(L, g, st);
        }
      }
      if (L.k == 2) return warp_launch_r<T, V, 2, 32>(L, g, st);
      return warp_launch_r<T, V, 4, 32>(L, g, st);
    case SmPath::RowsCluster:
      if (!device_has_clusters()) {  // before sm_90: the two-pass kernel
        SmLaunch L2 = L;
        L2.path = SmPath::RowsOnline;
        L2.threads = 512;
        return launch_typed<T>(L2, st);
      }
      [[fallthrough]];
    case SmPath::RowsBlock:
      if (bwd) return launch_reg<T, true>(L, g, st);
      return launch_reg<T, false>(L, g, st);
    case SmPath::RowsOnline: {
      const unsigned blocks = grid_of(L.rows);
      if (bwd) rows_online_bwd<T, V><<<blocks, L.threads, 0, st>>>(g, out, in0, in1, log);
      else rows_online_fwd<T, V><<<blocks, L.threads, 0, st>>>(g, out, in0, log);
      return check_launch("softmax rows_online");
    }
    case SmPath::RowsLoop: {
      const unsigned blocks = grid_of((L.rows + 7) / 8);
      if (bwd) rows_loop_bwd<T><<<blocks, 256, 0, st>>>(g, out, in0, in1, log);
      else rows_loop_fwd<T><<<blocks, 256, 0, st>>>(g, out, in0, log);
      return check_launch("softmax rows_loop");
    }
    case SmPath::Columns:
    case SmPath::Strided: {
      const unsigned blocks = grid_of((L.rows + 255) / 256);
      NdGeo gn;
      gn.rows = L.rows;
      gn.len = L.len;
      gn.nd = L.nd;
      for (int d = 0; d < L.nd; ++d) {
        gn.dims[d] = L.dims[d];
        for (int a = 0; a < 3; ++a) gn.st[a][d] = L.stride[a][d];
      }
      for (int a = 0; a < 3; ++a) gn.ax[a] = L.axis_stride[a];
      if (L.path == SmPath::Columns) {
        if (bwd) cols_bwd<T, false><<<blocks, 256, 0, st>>>(g, gn, out, in0, in1, log);
        else cols_fwd<T, false><<<blocks, 256, 0, st>>>(g, gn, out, in0, log);
      } else {
        if (bwd) cols_bwd<T, true><<<blocks, 256, 0, st>>>(g, gn, out, in0, in1, log);
        else cols_fwd<T, true><<<blocks, 256, 0, st>>>(g, gn, out, in0, log);
      }
      return check_launch("softmax columns");
    }
  }
}

}  // namespace baracuda::softmax::detail
