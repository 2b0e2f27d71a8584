// GroupNorm / InstanceNorm / BatchNorm kernels (forward and backward) over [N, C, S] views.
// Included only by channel_norm_<dtype>.cu, which instantiate chan_launch_t<T>. The passes and
// the partition are described in channel_norm_launch.h. Half types compute in f32, f64 in f64;
// every sum has a fixed order (shuffle trees, shared-memory trees, sequential loops), so results
// are deterministic and depend only on the shape.
#pragma once
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/packed_vec.cuh"
#include "norm/channel_norm_launch.h"

namespace baracuda::norm::chan {
using namespace baracuda::kernels;

constexpr int kWarps = kChanThreads / 32;
// Rows in flight per thread in the column kernels (a warp reads 32 channels of a row: 64 bytes
// for 16-bit types, so those keep more rows in flight).
template <class T> constexpr int col_unroll() { return sizeof(T) == 2 ? 8 : 4; }

// weight / bias / running stats: T or f32, chosen at run time (a uniform branch).
template <class T, class C> __device__ __forceinline__ C ld_param(const void* p, bool f32, int64_t i) {
  if (f32) return C(static_cast<const float*>(p)[i]);
  return C(to_compute(static_cast<const T*>(p)[i]));
}
template <class T, class C> __device__ __forceinline__ void st_param(void* p, bool f32, int64_t i, C v) {
  if (f32) static_cast<float*>(p)[i] = float(v);
  else static_cast<T*>(p)[i] = from_compute<T>(v);
}
template <class T, class C> __device__ __forceinline__ C ld(const void* p, int64_t off) {
  return C(to_compute(static_cast<const T*>(p)[off]));
}

// 16 bytes of T (vector path of the plane kernels).
template <class T> struct alignas(16) Vec16 {
  T v[16 / sizeof(T)];
};
template <class T, class C> __device__ __forceinline__ void ld_vec(const void* p, int64_t off, C* out) {
  const Vec16<T> u = *reinterpret_cast<const Vec16<T>*>(static_cast<const T*>(p) + off);
#pragma unroll
  for (int k = 0; k < int(16 / sizeof(T)); ++k) out[k] = C(to_compute(u.v[k]));
}
template <class T, class C> __device__ __forceinline__ void st_vec(void* p, int64_t off, const C* in) {
  uint4 u = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int k = 0; k < int(16 / sizeof(T)); ++k) pack_into<T>(u, k, in[k]);
  stg16(static_cast<T*>(p) + off, u);  // one 16-byte store (a struct store was split: packed_vec.cuh)
}
constexpr int kVecUnroll = 2;  // 16-byte vectors in flight per lane in the vector plane kernels

// (count, mean, M2) of a set; merged with Chan's formula (b into a; a fixed operand order).
template <class C> struct Moments {
  C n, mean, m2;
};
template <class C> __device__ __forceinline__ Moments<C> merge(Moments<C> a, Moments<C> b) {
  if (b.n == C(0)) return a;
  if (a.n == C(0)) return b;
  const C n = a.n + b.n;
  const C d = b.mean - a.mean;
  const C f = b.n / n;
  return {n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}
// Shifted sums (s1 = sum(x - K), s2 = sum((x - K)^2) over cnt values) -> moments.
template <class C> __device__ __forceinline__ Moments<C> from_shifted(C cnt, C K, C s1, C s2) {
  if (cnt == C(0)) return {C(0), C(0), C(0)};
  const C d = s1 / cnt;
  return {cnt, K + d, max(s2 - s1 * d, C(0))};
}
template <class C> __device__ __forceinline__ Moments<C> shfl_down(const Moments<C>& m, int o, int width) {
  return {__shfl_down_sync(0xffffffffu, m.n, o, width), __shfl_down_sync(0xffffffffu, m.mean, o, width),
          __shfl_down_sync(0xffffffffu, m.m2, o, width)};
}
// The first lane of each aligned group of `width` lanes (a power of two <= 32) gets the group's
// merge / sum (a fixed tree); every lane of the warp must call.
template <class C> __device__ __forceinline__ Moments<C> warp_merge(Moments<C> m, int width = 32) {
  for (int o = width / 2; o > 0; o >>= 1) m = merge(m, shfl_down(m, o, width));
  return m;
}
template <class C> __device__ __forceinline__ C warp_sum(C v, int width = 32) {
  for (int o = width / 2; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o, width);
  return v;
}
// q = a / b, r = a % b for a, b >= 0: 32-bit unsigned division when both fit.
__device__ __forceinline__ void divmod(int64_t a, int64_t b, int64_t& q, int64_t& r) {
  if (((a | b) >> 32) == 0) {
    const uint32_t q32 = uint32_t(a) / uint32_t(b);
    q = q32;
    r = int64_t(uint32_t(a) - q32 * uint32_t(b));
  } else {
    q = a / b;
    r = a - q * b;
  }
}

// Partial index of (n, c, chunk p): per (n, c) contiguous over p (per-group units), or per c
// contiguous over (n, p) (per-channel units), so that a unit's partials form one span.
__device__ __forceinline__ int64_t partial_index(const ChanNormLaunch& L, int64_t n, int64_t c, int64_t p) {
  const int64_t P = L.part.P;
  return L.per_channel ? (c * L.N + n) * P + p : (n * L.C + c) * P + p;
}
// Column kernels: the element offset of row rr of a task's sample along a tensor's [n, c, s]
// strides st. With flat rows (L.flat_S > 0: per-channel statistics, the N x S rows as one [1, C,
// N * S] range whose operands do not all collapse n into s) row rr is (rr / flat_S, rr % flat_S).
__device__ __forceinline__ int64_t row_offset(const ChanNormLaunch& L, const int64_t st[3], int64_t rr) {
  if (L.flat_S == 0) return rr * st[2];
  int64_t q, r;
  divmod(rr, L.flat_S, q, r);
  return q * st[0] + r * st[2];
}
// Statistic unit of (n, c), and the coefficient-table entry of (n, c).
__device__ __forceinline__ int64_t unit_of(const ChanNormLaunch& L, int64_t n, int64_t c) {
  if (L.per_channel) return L.fold ? c / L.fold : c;
  int64_t g, r;
  divmod(c, L.C / L.G, g, r);
  return n * L.G + g;
}
__device__ __forceinline__ int64_t entry_of(const ChanNormLaunch& L, int64_t n, int64_t c) {
  return L.per_channel ? (L.fold ? c / L.fold : c) : n * L.C + c;
}

template <class C> struct Pointers {
  C* partials;  // [.., 3]
  C* table;     // [entries, 4]
  C* aux;       // [N*C or C, 2]
};
template <class C> __device__ __forceinline__ Pointers<C> ws(const ChanNormLaunch& L) {
  return {static_cast<C*>(L.partials), static_cast<C*>(L.table), static_cast<C*>(L.aux)};
}
// Mean and rstd of unit u as the backward reads them: the saved stats, or (running modes) the
// statistics the prep kernel wrote into aux.
template <class C> __device__ __forceinline__ void unit_stats(const ChanNormLaunch& L, const Pointers<C>& W, int64_t u,
                                                              C& mean, C& rstd) {
  if (L.mode == ChanMode::BackwardRunning) {
    mean = W.aux[2 * u];
    rstd = W.aux[2 * u + 1];
  } else {
    mean = static_cast<const C*>(L.mean)[u];
    rstd = static_cast<const C*>(L.rstd)[u];
  }
}

// ---- stats pass ---------------------------------------------------------------------------------
// Forward: (count, mean, M2) of the task's values from sums shifted by the chunk's first value
// (no E[x^2] - E[x]^2 cancellation for data far from 0). Backward: (sum dy, sum dy * (x - mean), 0).

// Planes, vector path (L.vec: every plane-kernel operand has spatial stride 1, 16-byte aligned
// planes and chunks): a warp per (plane (n, c), chunk p); each lane reads 16-byte vectors, lanes
// cover consecutive vectors, kVecUnroll vectors in flight per lane.
template <class T, bool BWD>
__global__ void __launch_bounds__(kChanThreads, 4) stats_planes_vec(const ChanNormLaunch L) {
  using C = compute_t<T>;
  constexpr int V = int(16 / sizeof(T));
  constexpr int64_t VSTEP = 32 * V;  // elements per warp-wide vector load
  const Pointers<C> W = ws<C>(L);
  const int lane = threadIdx.x & 31;
  const int64_t P = L.part.P, CL = L.part.chunk;
  for (int64_t task = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); task < L.part.tasks;
       task += int64_t(gridDim.x) * kWarps) {
    int64_t p, q, n, c;
    divmod(task, P, q, p);
    divmod(q, L.C, n, c);
    const int64_t s0 = p * CL, s1 = min(L.S, s0 + CL);
    const int64_t xb = n * L.xs[0] + c * L.xs[1];
    C a = 0, b = 0, cnt = 0;
    if constexpr (!BWD) {
      const C K = ld<T, C>(L.x, xb + s0);
      for (int64_t s = s0 + lane * V; s < s1; s += VSTEP * kVecUnroll) {
        C v[kVecUnroll][V];
#pragma unroll
        for (int u = 0; u < kVecUnroll; ++u) {
          if (s + VSTEP * u < s1) {
            ld_vec<T, C>(L.x, xb + s + VSTEP * u, v[u]);
          } else {
#pragma unroll
            for (int k = 0; k < V; ++k) v[u][k] = K;
          }
        }
#pragma unroll
        for (int u = 0; u < kVecUnroll; ++u) {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const C d = v[u][k] - K;
            a += d;
            b += d * d;
          }
          cnt += s + VSTEP * u < s1 ? C(V) : C(0);
        }
      }
      Moments<C> m = warp_merge(from_shifted(cnt, K, a, b), 32);
      if (lane == 0) {
        C* out = W.partials + 3 * partial_index(L, n, c, p);
        out[0] = m.n; out[1] = m.mean; out[2] = m.m2;
      }
    } else {
      C mean, rstd;
      unit_stats(L, W, unit_of(L, n, c), mean, rstd);
      const int64_t gb = n * L.gys[0] + c * L.gys[1];
      for (int64_t s = s0 + lane * V; s < s1; s += VSTEP * kVecUnroll) {
        C dy[kVecUnroll][V], xv[kVecUnroll][V];
#pragma unroll
        for (int u = 0; u < kVecUnroll; ++u) {
          if (s + VSTEP * u < s1) {
            ld_vec<T, C>(L.gy, gb + s + VSTEP * u, dy[u]);
            ld_vec<T, C>(L.x, xb + s + VSTEP * u, xv[u]);
          } else {
#pragma unroll
            for (int k = 0; k < V; ++k) { dy[u][k] = C(0); xv[u][k] = mean; }
          }
        }
#pragma unroll
        for (int u = 0; u < kVecUnroll; ++u)
#pragma unroll
          for (int k = 0; k < V; ++k) {
            a += dy[u][k];
            b += dy[u][k] * (xv[u][k] - mean);
          }
      }
      a = warp_sum(a, 32);
      b = warp_sum(b, 32);
      if (lane == 0) {
        C* out = W.partials + 3 * partial_index(L, n, c, p);
        out[0] = a; out[1] = b; out[2] = 0;
      }
    }
  }
}

// Planes, scalar path (any spatial strides): a group of GW = L.part.gw lanes (8, 16 or 32; small
// planes share a warp) per (plane, chunk); lanes stride the chunk, 4 loads in flight. The task
// loop is uniform over the warp (inactive groups still join the shuffles).
template <class T, bool BWD>
__global__ void __launch_bounds__(kChanThreads, 4) stats_planes_scalar(const ChanNormLaunch L) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  const int GW = L.part.gw;
  const int lane = threadIdx.x & 31, sub = lane % GW;
  const int64_t gpw = 32 / GW;  // groups per warp
  const int64_t P = L.part.P, CL = L.part.chunk;
  for (int64_t base = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * gpw; base < L.part.tasks;
       base += int64_t(gridDim.x) * kWarps * gpw) {
    const int64_t task = base + lane / GW;
    const bool active = task < L.part.tasks;
    int64_t p = 0, q = 0, n = 0, c = 0;
    if (active) {
      divmod(task, P, q, p);
      divmod(q, L.C, n, c);
    }
    const int64_t s0 = p * CL, s1 = active ? min(L.S, s0 + CL) : s0;
    const int64_t xb = n * L.xs[0] + c * L.xs[1];
    C a = 0, b = 0, cnt = 0;
    if constexpr (!BWD) {
      const C K = active ? ld<T, C>(L.x, xb + s0 * L.xs[2]) : C(0);
      for (int64_t s = s0 + sub; s < s1; s += 4 * GW) {
        C v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = s + GW * k < s1 ? ld<T, C>(L.x, xb + (s + GW * k) * L.xs[2]) - K : C(0);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          a += v[k];
          b += v[k] * v[k];
          cnt += s + GW * k < s1 ? C(1) : C(0);
        }
      }
      Moments<C> m = warp_merge(from_shifted(cnt, K, a, b), GW);
      if (active && sub == 0) {
        C* out = W.partials + 3 * partial_index(L, n, c, p);
        out[0] = m.n; out[1] = m.mean; out[2] = m.m2;
      }
    } else {
      C mean = 0, rstd = 0;
      if (active) unit_stats(L, W, unit_of(L, n, c), mean, rstd);
      const int64_t gb = n * L.gys[0] + c * L.gys[1];
      for (int64_t s = s0 + sub; s < s1; s += 4 * GW) {
        C dy[4], xv[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const bool in = s + GW * k < s1;
          dy[k] = in ? ld<T, C>(L.gy, gb + (s + GW * k) * L.gys[2]) : C(0);
          xv[k] = in ? ld<T, C>(L.x, xb + (s + GW * k) * L.xs[2]) : mean;
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          a += dy[k];
          b += dy[k] * (xv[k] - mean);
        }
      }
      a = warp_sum(a, GW);
      b = warp_sum(b, GW);
      if (active && sub == 0) {
        C* out = W.partials + 3 * partial_index(L, n, c, p);
        out[0] = a; out[1] = b; out[2] = 0;
      }
    }
  }
}

// Columns: a block per (n, chunk p of rows, tile of channels); thread (tx, ty) walks rows
// ty, ty + lanes, ... of column tile * TW + tx; the row lanes merge in a shared-memory tree.
template <class T, bool BWD> __global__ void __launch_bounds__(kChanThreads, 4) stats_columns(const ChanNormLaunch L) {
  using C = compute_t<T>;
  constexpr int kColUnroll = col_unroll<T>();
  __shared__ C sh[3][kChanThreads];
  const Pointers<C> W = ws<C>(L);
  const int TW = L.part.tile;
  const int lanes = kChanThreads / TW;
  const int tx = threadIdx.x % TW, ty = threadIdx.x / TW;
  const int64_t P = L.part.P, CR = L.part.chunk;
  const int64_t col_tiles = (L.C + TW - 1) / TW;
  for (int64_t task = blockIdx.x; task < L.part.tasks; task += gridDim.x) {
    int64_t tile, rest, p, n;
    divmod(task, col_tiles, rest, tile);
    divmod(rest, P, n, p);
    const int64_t c = tile * TW + tx;
    const bool col_in = c < L.C;
    const int64_t r0 = p * CR, r1 = min(L.S, r0 + CR);
    const int64_t xb = n * L.xs[0] + c * L.xs[1];
    C a = 0, b = 0, cnt = 0, K = 0;
    if constexpr (!BWD) {
      if (col_in) {
        K = ld<T, C>(L.x, xb + row_offset(L, L.xs, r0));
        for (int64_t r = r0 + ty; r < r1; r += kColUnroll * lanes) {
          C v[kColUnroll];
#pragma unroll
          for (int k = 0; k < kColUnroll; ++k) {
            const int64_t rr = r + int64_t(k) * lanes;
            v[k] = rr < r1 ? ld<T, C>(L.x, xb + row_offset(L, L.xs, rr)) - K : C(0);
          }
#pragma unroll
          for (int k = 0; k < kColUnroll; ++k) {
            a += v[k];
            b += v[k] * v[k];
            cnt += r + int64_t(k) * lanes < r1 ? C(1) : C(0);
          }
        }
      }
      Moments<C> m = from_shifted(cnt, K, a, b);
      sh[0][threadIdx.x] = m.n; sh[1][threadIdx.x] = m.mean; sh[2][threadIdx.x] = m.m2;
      __syncthreads();
      for (int h = lanes / 2; h > 0; h >>= 1) {
        if (ty < h) {
          const int o = threadIdx.x + h * TW;
          m = merge(m, Moments<C>{sh[0][o], sh[1][o], sh[2][o]});
          sh[0][threadIdx.x] = m.n; sh[1][threadIdx.x] = m.mean; sh[2][threadIdx.x] = m.m2;
        }
        __syncthreads();
      }
      if (ty == 0 && col_in) {
        C* out = W.partials + 3 * partial_index(L, n, c, p);
        out[0] = m.n; out[1] = m.mean; out[2] = m.m2;
      }
    } else {
      if (col_in) {
        C mean, rstd;
        unit_stats(L, W, unit_of(L, n, c), mean, rstd);
        const int64_t gb = n * L.gys[0] + c * L.gys[1];
        for (int64_t r = r0 + ty; r < r1; r += kColUnroll * lanes) {
          C dy[kColUnroll], xv[kColUnroll];
#pragma unroll
          for (int k = 0; k < kColUnroll; ++k) {
            const int64_t rr = r + int64_t(k) * lanes;
            dy[k] = rr < r1 ? ld<T, C>(L.gy, gb + row_offset(L, L.gys, rr)) : C(0);
            xv[k] = rr < r1 ? ld<T, C>(L.x, xb + row_offset(L, L.xs, rr)) : mean;
          }
#pragma unroll
          for (int k = 0; k < kColUnroll; ++k) {
            a += dy[k];
            b += dy[k] * (xv[k] - mean);
          }
        }
      }
      sh[0][threadIdx.x] = a; sh[1][threadIdx.x] = b;
      __syncthreads();
      for (int h = lanes / 2; h > 0; h >>= 1) {
        if (ty < h) {
          a += sh[0][threadIdx.x + h * TW];
          b += sh[1][threadIdx.x + h * TW];
          sh[0][threadIdx.x] = a; sh[1][threadIdx.x] = b;
        }
        __syncthreads();
      }
      if (ty == 0 && col_in) {
        C* out = W.partials + 3 * partial_index(L, n, c, p);
        out[0] = a; out[1] = b; out[2] = 0;
      }
    }
    __syncthreads();  // sh is reused by the next task
  }
}

// Columns, vector path (L.cvec): a thread owns V = 16 / sizeof(T) adjacent channels and reads
// 16-byte vectors. Rows are one range (L.flat_S == 0: the plan takes the scalar kernels for flat
// rows that need row_offset's split, which would cost these kernels registers). A block per (n,
// chunk p of rows, tile of VT = L.part.vtile vector columns); thread (tx, ty) walks rows ty,
// ty + lanes, ... (lanes = 256 / VT), kColVecUnroll rows in flight.
// Row lanes merge in a fixed order: a shuffle tree inside each warp, then the warps in order.
constexpr int kColVecUnroll = 4;
constexpr int kColVecMinBlocks = 3;  // stats_columns_vec: <= 80 registers (3 x V accumulators per thread)
// The 16-byte vector of T at element offset off, as packed words (common/packed_vec.cuh).
template <class T> __device__ __forceinline__ uint4 ld_u4(const void* p, int64_t off) {
  return *reinterpret_cast<const uint4*>(static_cast<const T*>(p) + off);
}
// The 4 table values of entry i (16- or 32-byte aligned: the table is 256-byte aligned).
template <class C> __device__ __forceinline__ void ld_entry(const C* table, int64_t i, C out[4]) {
  if constexpr (sizeof(C) == 4) {
    const float4 v = *reinterpret_cast<const float4*>(table + 4 * i);
    out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
  } else {
    const double2 v0 = *reinterpret_cast<const double2*>(table + 4 * i);
    const double2 v1 = *reinterpret_cast<const double2*>(table + 4 * i + 2);
    out[0] = v0.x; out[1] = v0.y; out[2] = v1.x; out[3] = v1.y;
  }
}

template <class T, bool BWD>
__global__ void __launch_bounds__(kChanThreads, kColVecMinBlocks) stats_columns_vec(const ChanNormLaunch L) {
  using C = compute_t<T>;
  constexpr int V = int(16 / sizeof(T));
  constexpr int U = BWD ? kColVecUnroll / 2 : kColVecUnroll;  // backward holds dy and x
  // Per warp, per vector column, per channel: 3 values (forward moments or backward sums).
  __shared__ C sh[kWarps][kChanVecTileMax][V][3];
  const Pointers<C> W = ws<C>(L);
  const int VT = L.part.vtile;
  const int lanes = kChanThreads / VT;
  const int tx = threadIdx.x % VT, ty = threadIdx.x / VT;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t P = L.part.P, CR = L.part.chunk;
  const int64_t col_tiles = (L.C / V + VT - 1) / VT;
  for (int64_t task = blockIdx.x; task < L.part.vtasks; task += gridDim.x) {
    int64_t tile, rest, p, n;
    divmod(task, col_tiles, rest, tile);
    divmod(rest, P, n, p);
    const int64_t c = (tile * VT + tx) * V;  // first channel of this thread; C % V == 0
    const bool col_in = c < L.C;
    const int64_t r0 = p * CR, r1 = min(L.S, r0 + CR);
    const int64_t xb = n * L.xs[0] + c;  // channel stride 1
    if constexpr (!BWD) {
      C K[V], a[V], b[V], cnt = 0;
#pragma unroll
      for (int k = 0; k < V; ++k) { K[k] = 0; a[k] = 0; b[k] = 0; }
      if (col_in) {
        ld_vec<T, C>(L.x, xb + r0 * L.xs[2], K);
#pragma unroll 1  // U rows in flight per iteration
        for (int64_t r = r0 + ty; r < r1; r += U * lanes) {
          uint4 raw[U];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int64_t rr = r + int64_t(u) * lanes;
            if (rr < r1) raw[u] = ld_u4<T>(L.x, xb + rr * L.xs[2]);
          }
#pragma unroll
          for (int u = 0; u < U; ++u) {
            if (r + int64_t(u) * lanes < r1) {
#pragma unroll
              for (int k = 0; k < V; ++k) {
                const C d = unpack<T>(raw[u], k) - K[k];
                a[k] += d;
                b[k] += d * d;
              }
              cnt += C(1);
            }
          }
        }
      }
#pragma unroll
      for (int k = 0; k < V; ++k) {
        // Rows of the same column inside the warp: lanes tx, tx + VT, ...; a shuffle tree.
        Moments<C> m = from_shifted(cnt, K[k], a[k], b[k]);
        for (int o = 16; o >= VT; o >>= 1) m = merge(m, shfl_down(m, o, 32));
        if (lane < VT) { sh[warp][lane][k][0] = m.n; sh[warp][lane][k][1] = m.mean; sh[warp][lane][k][2] = m.m2; }
      }
      __syncthreads();
      if (threadIdx.x < VT * V) {
        const int jx = threadIdx.x / V, k = threadIdx.x % V;
        const int64_t cj = (tile * VT + jx) * V + k;
        Moments<C> m{sh[0][jx][k][0], sh[0][jx][k][1], sh[0][jx][k][2]};
        for (int w = 1; w < kWarps; ++w) m = merge(m, Moments<C>{sh[w][jx][k][0], sh[w][jx][k][1], sh[w][jx][k][2]});
        if (cj < L.C) {
          C* out = W.partials + 3 * partial_index(L, n, cj, p);
          out[0] = m.n; out[1] = m.mean; out[2] = m.m2;
        }
      }
    } else {
      C mean[V], a[V], b[V];
#pragma unroll
      for (int k = 0; k < V; ++k) { mean[k] = 0; a[k] = 0; b[k] = 0; }
      if (col_in) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          C rstd;
          unit_stats(L, W, unit_of(L, n, c + k), mean[k], rstd);
        }
        const int64_t gb = n * L.gys[0] + c;
#pragma unroll 1  // U rows in flight per iteration
        for (int64_t r = r0 + ty; r < r1; r += U * lanes) {
          uint4 dy[U], xv[U];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int64_t rr = r + int64_t(u) * lanes;
            if (rr < r1) {
              dy[u] = ld_u4<T>(L.gy, gb + rr * L.gys[2]);
              xv[u] = ld_u4<T>(L.x, xb + rr * L.xs[2]);
            }
          }
#pragma unroll
          for (int u = 0; u < U; ++u) {
            if (r + int64_t(u) * lanes < r1) {
#pragma unroll
              for (int k = 0; k < V; ++k) {
                const C g = unpack<T>(dy[u], k);
                a[k] += g;
                b[k] += g * (unpack<T>(xv[u], k) - mean[k]);
              }
            }
          }
        }
      }
#pragma unroll
      for (int k = 0; k < V; ++k) {
        C sa = a[k], sb = b[k];
        for (int o = 16; o >= VT; o >>= 1) {
          sa += __shfl_down_sync(0xffffffffu, sa, o, 32);
          sb += __shfl_down_sync(0xffffffffu, sb, o, 32);
        }
        if (lane < VT) { sh[warp][lane][k][0] = sa; sh[warp][lane][k][1] = sb; }
      }
      __syncthreads();
      if (threadIdx.x < VT * V) {
        const int jx = threadIdx.x / V, k = threadIdx.x % V;
        const int64_t cj = (tile * VT + jx) * V + k;
        C sa = sh[0][jx][k][0], sb = sh[0][jx][k][1];
        for (int w = 1; w < kWarps; ++w) { sa += sh[w][jx][k][0]; sb += sh[w][jx][k][1]; }
        if (cj < L.C) {
          C* out = W.partials + 3 * partial_index(L, n, cj, p);
          out[0] = sa; out[1] = sb; out[2] = 0;
        }
      }
    }
    __syncthreads();  // sh is reused by the next task
  }
}

// ---- finalize --------------------------------------------------------------------------------
// The unit's channels: per-group units (n, g) cover channels g*Cg .. g*Cg+Cg-1 of sample n; a
// per-channel unit covers channel c of every sample.
__device__ __forceinline__ void unit_channels(const ChanNormLaunch& L, int64_t u, int64_t& n, int64_t& c0,
                                              int64_t& nch) {
  if (L.per_channel) { n = 0; c0 = u; nch = 1; }
  else { const int64_t cg = L.C / L.G; n = u / L.G; c0 = (u % L.G) * cg; nch = cg; }
}

// ---- pieces shared by the block-per-unit and warp-per-unit finalize kernels ----------------------
// Forward: the unit's mean / rstd (saved when asked) and the running-stat update or its per-instance
// record in aux; returns rstd. One thread per unit calls it.
template <class T, class C>
__device__ __forceinline__ C store_unit_stats(const ChanNormLaunch& L, const Pointers<C>& W, int64_t u, const Moments<C>& m) {
  const C var = m.m2 / m.n;  // biased, as the normalization uses
  const C rstd = C(1) / sqrt(var + C(L.eps));
  if (L.mean) static_cast<C*>(L.mean)[u] = m.mean;
  if (L.rstd) static_cast<C*>(L.rstd)[u] = rstd;
  const C unbiased = m.n > C(1) ? m.m2 / (m.n - C(1)) : C(NAN);
  if (L.update_running && L.per_channel) {
    const C mo = C(L.momentum);
    const C rm = ld_param<T, C>(L.rmean, L.r_f32, u), rv = ld_param<T, C>(L.rvar, L.r_f32, u);
    st_param<T, C>(L.rmean, L.r_f32, u, (C(1) - mo) * rm + mo * m.mean);
    st_param<T, C>(L.rvar, L.r_f32, u, (C(1) - mo) * rv + mo * unbiased);
  }
  if (L.update_running && !L.per_channel) {
    W.aux[2 * u] = m.mean;
    W.aux[2 * u + 1] = unbiased;
  }
  return rstd;
}
// Forward table entries (mean, rstd * w, b, 0) of the unit's channels j0, j0 + step, ...
template <class T, class C>
__device__ __forceinline__ void fill_forward_table(const ChanNormLaunch& L, const Pointers<C>& W, int64_t n, int64_t c0,
                                                   int64_t nch, C mean, C rstd, int64_t j0, int64_t step) {
  for (int64_t j = j0; j < nch; j += step) {
    const int64_t c = c0 + j;
    C* e = W.table + 4 * entry_of(L, n, c);
    e[0] = mean;
    e[1] = L.w ? rstd * ld_param<T, C>(L.w, L.w_f32, c) : rstd;
    e[2] = L.b ? ld_param<T, C>(L.b, L.b_f32, c) : C(0);
    e[3] = 0;
  }
}
// Backward, channel c of unit (n, ..): a warp sums its K partials (sum dy, sum dy * (x - mean)) in a
// fixed order; lane 0 writes grad_weight / grad_bias (per channel) or their per-sample record in
// aux (per group) and adds w * db, w * gw to its S1, S2.
template <class T, class C>
__device__ __forceinline__ void channel_backward_sums(const ChanNormLaunch& L, const Pointers<C>& W, int64_t n, int64_t c,
                                                      int64_t K, C rstd, int lane, C& S1, C& S2) {
  const C* src = W.partials + 3 * (L.per_channel ? c * K : (n * L.C + c) * K);
  C db = 0, ds = 0;
  for (int64_t i = lane; i < K; i += 32) { db += src[3 * i]; ds += src[3 * i + 1]; }
  db = warp_sum(db);
  ds = warp_sum(ds);
  if (lane == 0) {
    const C gw = ds * rstd;
    if (L.per_channel) {
      if (L.gw) st_param<T, C>(L.gw, L.w_f32, c, gw);
      if (L.gb) st_param<T, C>(L.gb, L.b_f32, c, db);
    } else if (L.gw || L.gb) {
      W.aux[2 * (n * L.C + c)] = gw;
      W.aux[2 * (n * L.C + c) + 1] = db;
    }
    const C w = L.w ? ld_param<T, C>(L.w, L.w_f32, c) : C(1);
    S1 += w * db;
    S2 += w * gw;
  }
}
// Backward table entries (mean, rstd * w, rstd * S1 / M, rstd^2 * S2 / M) of channels j0, j0 + step, ...
template <class T, class C>
__device__ __forceinline__ void fill_backward_table(const ChanNormLaunch& L, const Pointers<C>& W, int64_t n, int64_t c0,
                                                    int64_t nch, C mean, C rstd, C S1, C S2, int64_t j0, int64_t step) {
  const C M = L.per_channel ? C(double(L.N) * double(L.S)) : C(double(nch) * double(L.S));
  for (int64_t j = j0; j < nch; j += step) {
    const int64_t c = c0 + j;
    const C w = L.w ? ld_param<T, C>(L.w, L.w_f32, c) : C(1);
    C* e = W.table + 4 * entry_of(L, n, c);
    e[0] = mean;
    e[1] = rstd * w;
    e[2] = rstd * S1 / M;
    e[3] = rstd * rstd * S2 / M;
  }
}

// Forward: a block per unit merges its partials (a contiguous span), then writes the saved stats,
// the running stats (per-channel units), the InstanceNorm aux (mean, unbiased var) and the
// table entries (mean, rstd * weight, bias) of its channels.
template <class T> __global__ void __launch_bounds__(kChanThreads) finalize_forward(const ChanNormLaunch L, int64_t units) {
  using C = compute_t<T>;
  __shared__ C sh[3][kChanThreads];
  __shared__ C s_mean, s_rstd;
  const Pointers<C> W = ws<C>(L);
  const int64_t P = L.part.P;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    int64_t n, c0, nch;
    unit_channels(L, u, n, c0, nch);
    const int64_t span = L.per_channel ? L.N * P : nch * P;
    const C* src = W.partials + 3 * (L.per_channel ? c0 * L.N * P : (n * L.C + c0) * P);
    Moments<C> m{0, 0, 0};
    for (int64_t i = threadIdx.x; i < span; i += kChanThreads) m = merge(m, Moments<C>{src[3 * i], src[3 * i + 1], src[3 * i + 2]});
    sh[0][threadIdx.x] = m.n; sh[1][threadIdx.x] = m.mean; sh[2][threadIdx.x] = m.m2;
    __syncthreads();
    for (int h = kChanThreads / 2; h > 0; h >>= 1) {
      if (threadIdx.x < h) {
        const int o = threadIdx.x + h;
        m = merge(m, Moments<C>{sh[0][o], sh[1][o], sh[2][o]});
        sh[0][threadIdx.x] = m.n; sh[1][threadIdx.x] = m.mean; sh[2][threadIdx.x] = m.m2;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      s_mean = m.mean;
      s_rstd = store_unit_stats<T>(L, W, u, m);
    }
    __syncthreads();
    const C mean = s_mean, rstd = s_rstd;
    fill_forward_table<T>(L, W, n, c0, nch, mean, rstd, threadIdx.x, kChanThreads);
    __syncthreads();  // s_mean / sh are reused by the next unit
  }
}

// InstanceNorm running stats: per channel, the mean over samples (in order) of the per-instance
// mean and unbiased variance, blended with momentum.
template <class T> __global__ void __launch_bounds__(kChanThreads) instance_running(const ChanNormLaunch L) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  for (int64_t c = int64_t(blockIdx.x) * kChanThreads + threadIdx.x; c < L.C; c += int64_t(gridDim.x) * kChanThreads) {
    C sm = 0, sv = 0;
    for (int64_t n = 0; n < L.N; ++n) {
      sm += W.aux[2 * (n * L.C + c)];
      sv += W.aux[2 * (n * L.C + c) + 1];
    }
    const C mo = C(L.momentum), inv_n = C(1) / C(L.N);
    const C rm = ld_param<T, C>(L.rmean, L.r_f32, c), rv = ld_param<T, C>(L.rvar, L.r_f32, c);
    st_param<T, C>(L.rmean, L.r_f32, c, (C(1) - mo) * rm + mo * (sm * inv_n));
    st_param<T, C>(L.rvar, L.r_f32, c, (C(1) - mo) * rv + mo * (sv * inv_n));
  }
}

// Running modes: per channel, the table from running_mean / running_var (forward: mean,
// rstd * weight, bias; backward: mean, weight * rstd, 0, 0) and, backward, (mean, rstd) in aux
// for the stats pass.
template <class T> __global__ void __launch_bounds__(kChanThreads) running_table(const ChanNormLaunch L) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  const bool bwd = L.mode == ChanMode::BackwardRunning;
  for (int64_t c = int64_t(blockIdx.x) * kChanThreads + threadIdx.x; c < L.C; c += int64_t(gridDim.x) * kChanThreads) {
    const C mean = ld_param<T, C>(L.rmean, L.r_f32, c);
    const C rstd = C(1) / sqrt(ld_param<T, C>(L.rvar, L.r_f32, c) + C(L.eps));
    const C w = L.w ? ld_param<T, C>(L.w, L.w_f32, c) : C(1);
    C* e = W.table + 4 * c;
    e[0] = mean;
    e[1] = rstd * w;
    e[2] = (!bwd && L.b) ? ld_param<T, C>(L.b, L.b_f32, c) : C(0);
    e[3] = 0;
    if (bwd) { W.aux[2 * c] = mean; W.aux[2 * c + 1] = rstd; }
  }
}

// Backward: a block per unit. Warp w sums the partials of the unit's channels w, w + 8, ...
// (sum dy, sum dy * (x - mean) of (n, c), or of c over all n), giving grad_bias / grad_weight
// contributions (per channel: written; per group: into aux for grad_weight_bias) and the
// unit's S1 = sum(dy * w), S2 = sum(dy * w * xhat); then the table entries
// (mean, rstd * w, rstd * S1 / M, rstd^2 * S2 / M) of its channels (grad_x = k1 dy - k2 - (x - mean) k3).
template <class T> __global__ void __launch_bounds__(kChanThreads) finalize_backward(const ChanNormLaunch L, int64_t units) {
  using C = compute_t<T>;
  __shared__ C sh[2][kWarps];
  const Pointers<C> W = ws<C>(L);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t P = L.part.P;
  const bool running = L.mode == ChanMode::BackwardRunning;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    int64_t n, c0, nch;
    unit_channels(L, u, n, c0, nch);
    C mean, rstd;
    unit_stats(L, W, u, mean, rstd);
    const int64_t K = L.per_channel ? L.N * P : P;  // partials per channel of the unit
    C S1 = 0, S2 = 0;
    for (int64_t j = warp; j < nch; j += kWarps) {
      const int64_t c = c0 + j;
      channel_backward_sums<T>(L, W, n, c, K, rstd, lane, S1, S2);
    }
    if (lane == 0) { sh[0][warp] = S1; sh[1][warp] = S2; }
    __syncthreads();
    S1 = 0; S2 = 0;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) { S1 += sh[0][i]; S2 += sh[1][i]; }
    if (!running) {
      fill_backward_table<T>(L, W, n, c0, nch, mean, rstd, S1, S2, threadIdx.x, kChanThreads);
    }
    __syncthreads();  // sh is reused by the next unit
  }
}

// Many small units (InstanceNorm, GroupNorm with many samples): the same finalize work with a
// warp per unit (8 units per block, no block barriers). The summation order is fixed by the
// shape, as in the block kernels (which of the two runs depends only on the shape).
template <class T> __global__ void __launch_bounds__(kChanThreads) finalize_forward_warps(const ChanNormLaunch L, int64_t units) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  const int lane = threadIdx.x & 31;
  const int64_t P = L.part.P;
  for (int64_t u = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); u < units; u += int64_t(gridDim.x) * kWarps) {
    int64_t n, c0, nch;
    unit_channels(L, u, n, c0, nch);
    const int64_t span = L.per_channel ? L.N * P : nch * P;
    const C* src = W.partials + 3 * (L.per_channel ? c0 * L.N * P : (n * L.C + c0) * P);
    Moments<C> m{0, 0, 0};
    for (int64_t i = lane; i < span; i += 32) m = merge(m, Moments<C>{src[3 * i], src[3 * i + 1], src[3 * i + 2]});
    m = warp_merge(m);
    C rstd = C(0);
    if (lane == 0) rstd = store_unit_stats<T>(L, W, u, m);
    const C mean = __shfl_sync(0xffffffffu, m.mean, 0);
    rstd = __shfl_sync(0xffffffffu, rstd, 0);
    fill_forward_table<T>(L, W, n, c0, nch, mean, rstd, lane, 32);
  }
}

template <class T> __global__ void __launch_bounds__(kChanThreads) finalize_backward_warps(const ChanNormLaunch L, int64_t units) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  const int lane = threadIdx.x & 31;
  const int64_t P = L.part.P;
  const bool running = L.mode == ChanMode::BackwardRunning;
  for (int64_t u = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); u < units; u += int64_t(gridDim.x) * kWarps) {
    int64_t n, c0, nch;
    unit_channels(L, u, n, c0, nch);
    C mean, rstd;
    unit_stats(L, W, u, mean, rstd);
    const int64_t K = L.per_channel ? L.N * P : P;
    C S1 = 0, S2 = 0;
    for (int64_t j = 0; j < nch; ++j) {
      const int64_t c = c0 + j;
      channel_backward_sums<T>(L, W, n, c, K, rstd, lane, S1, S2);
    }
    S1 = __shfl_sync(0xffffffffu, S1, 0);
    S2 = __shfl_sync(0xffffffffu, S2, 0);
    if (!running) {
      fill_backward_table<T>(L, W, n, c0, nch, mean, rstd, S1, S2, lane, 32);
    }
  }
}

// GroupNorm grad_weight / grad_bias: per channel, the sum over samples (in order) of aux.
template <class T> __global__ void __launch_bounds__(kChanThreads) group_weight_grads(const ChanNormLaunch L) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  for (int64_t c = int64_t(blockIdx.x) * kChanThreads + threadIdx.x; c < L.C; c += int64_t(gridDim.x) * kChanThreads) {
    C gw = 0, gb = 0;
    for (int64_t n = 0; n < L.N; ++n) {
      gw += W.aux[2 * (n * L.C + c)];
      gb += W.aux[2 * (n * L.C + c) + 1];
    }
    if (L.gw) st_param<T, C>(L.gw, L.w_f32, c, gw);
    if (L.gb) st_param<T, C>(L.gb, L.b_f32, c, gb);
  }
}

// ---- apply ----------------------------------------------------------------------------------------
// Forward: y = (x - mean) * a + b; backward: grad_x = k1 * dy - k2 - (x - mean) * k3, with the
// (n, c) entry of the table. Same partition as the stats pass.
template <class T, bool BWD>
__global__ void __launch_bounds__(kChanThreads, 4) apply_planes_vec(const ChanNormLaunch L) {
  using C = compute_t<T>;
  constexpr int V = int(16 / sizeof(T));
  constexpr int64_t VSTEP = 32 * V;
  const Pointers<C> W = ws<C>(L);
  const int lane = threadIdx.x & 31;
  const int64_t P = L.part.P, CL = L.part.chunk;
  for (int64_t task = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); task < L.part.tasks;
       task += int64_t(gridDim.x) * kWarps) {
    int64_t p, q, n, c;
    divmod(task, P, q, p);
    divmod(q, L.C, n, c);
    const int64_t s0 = p * CL, s1 = min(L.S, s0 + CL);
    const C* e = W.table + 4 * entry_of(L, n, c);
    const C mean = e[0], k1 = e[1], k2 = e[2], k3 = e[3];
    const int64_t xb = n * L.xs[0] + c * L.xs[1];
    if constexpr (!BWD) {
      const int64_t yb = n * L.ys[0] + c * L.ys[1];
      for (int64_t s = s0 + lane * V; s < s1; s += VSTEP * kVecUnroll) {
        C v[kVecUnroll][V];
#pragma unroll
        for (int u = 0; u < kVecUnroll; ++u)
          if (s + VSTEP * u < s1) ld_vec<T, C>(L.x, xb + s + VSTEP * u, v[u]);
#pragma unroll
        for (int u = 0; u < kVecUnroll; ++u)
          if (s + VSTEP * u < s1) {
#pragma unroll
            for (int k = 0; k < V; ++k) v[u][k] = (v[u][k] - mean) * k1 + k2;
            st_vec<T, C>(L.y, yb + s + VSTEP * u, v[u]);
          }
      }
    } else {
      const int64_t gb = n * L.gys[0] + c * L.gys[1], ob = n * L.gxs[0] + c * L.gxs[1];
      for (int64_t s = s0 + lane * V; s < s1; s += VSTEP * kVecUnroll) {
        C dy[kVecUnroll][V], xv[kVecUnroll][V];
#pragma unroll
        for (int u = 0; u < kVecUnroll; ++u)
          if (s + VSTEP * u < s1) {
            ld_vec<T, C>(L.gy, gb + s + VSTEP * u, dy[u]);
            ld_vec<T, C>(L.x, xb + s + VSTEP * u, xv[u]);
          }
#pragma unroll
        for (int u = 0; u < kVecUnroll; ++u)
          if (s + VSTEP * u < s1) {
#pragma unroll
            for (int k = 0; k < V; ++k) dy[u][k] = k1 * dy[u][k] - k2 - (xv[u][k] - mean) * k3;
            st_vec<T, C>(L.gx, ob + s + VSTEP * u, dy[u]);
          }
      }
    }
  }
}

// Scalar path: groups of GW lanes per (plane, chunk), as stats_planes_scalar (no shuffles here).
template <class T, bool BWD>
__global__ void __launch_bounds__(kChanThreads, 4) apply_planes_scalar(const ChanNormLaunch L) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  const int GW = L.part.gw;
  const int lane = threadIdx.x & 31, sub = lane % GW;
  const int64_t gpw = 32 / GW;
  const int64_t P = L.part.P, CL = L.part.chunk;
  for (int64_t task = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * gpw + lane / GW; task < L.part.tasks;
       task += int64_t(gridDim.x) * kWarps * gpw) {
    int64_t p, q, n, c;
    divmod(task, P, q, p);
    divmod(q, L.C, n, c);
    const int64_t s0 = p * CL, s1 = min(L.S, s0 + CL);
    const C* e = W.table + 4 * entry_of(L, n, c);
    const C mean = e[0], k1 = e[1], k2 = e[2], k3 = e[3];
    const int64_t xb = n * L.xs[0] + c * L.xs[1];
    if constexpr (!BWD) {
      const int64_t yb = n * L.ys[0] + c * L.ys[1];
      for (int64_t s = s0 + sub; s < s1; s += 4 * GW) {
        C v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = s + GW * k < s1 ? ld<T, C>(L.x, xb + (s + GW * k) * L.xs[2]) : C(0);
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (s + GW * k < s1) static_cast<T*>(L.y)[yb + (s + GW * k) * L.ys[2]] = from_compute<T>((v[k] - mean) * k1 + k2);
      }
    } else {
      const int64_t gb = n * L.gys[0] + c * L.gys[1], ob = n * L.gxs[0] + c * L.gxs[1];
      for (int64_t s = s0 + sub; s < s1; s += 4 * GW) {
        C dy[4], xv[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const bool in = s + GW * k < s1;
          dy[k] = in ? ld<T, C>(L.gy, gb + (s + GW * k) * L.gys[2]) : C(0);
          xv[k] = in ? ld<T, C>(L.x, xb + (s + GW * k) * L.xs[2]) : C(0);
        }
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (s + GW * k < s1)
            static_cast<T*>(L.gx)[ob + (s + GW * k) * L.gxs[2]] = from_compute<T>(k1 * dy[k] - k2 - (xv[k] - mean) * k3);
      }
    }
  }
}

template <class T, bool BWD> __global__ void __launch_bounds__(kChanThreads, 4) apply_columns(const ChanNormLaunch L) {
  using C = compute_t<T>;
  constexpr int kColUnroll = BWD ? 4 : col_unroll<T>();  // backward holds dy and x
  const Pointers<C> W = ws<C>(L);
  const int TW = L.part.tile;
  const int lanes = kChanThreads / TW;
  const int tx = threadIdx.x % TW, ty = threadIdx.x / TW;
  const int64_t P = L.part.P, CR = L.part.chunk;
  const int64_t col_tiles = (L.C + TW - 1) / TW;
  for (int64_t task = blockIdx.x; task < L.part.tasks; task += gridDim.x) {
    int64_t tile, rest, p, n;
    divmod(task, col_tiles, rest, tile);
    divmod(rest, P, n, p);
    const int64_t c = tile * TW + tx;
    if (c >= L.C) continue;
    const int64_t r0 = p * CR, r1 = min(L.S, r0 + CR);
    const C* e = W.table + 4 * entry_of(L, n, c);
    const C mean = e[0], k1 = e[1], k2 = e[2], k3 = e[3];
    const int64_t xb = n * L.xs[0] + c * L.xs[1];
    if constexpr (!BWD) {
      const int64_t yb = n * L.ys[0] + c * L.ys[1];
      for (int64_t r = r0 + ty; r < r1; r += kColUnroll * lanes) {
        C v[kColUnroll];
#pragma unroll
        for (int k = 0; k < kColUnroll; ++k) {
          const int64_t rr = r + int64_t(k) * lanes;
          v[k] = rr < r1 ? ld<T, C>(L.x, xb + row_offset(L, L.xs, rr)) : C(0);
        }
#pragma unroll
        for (int k = 0; k < kColUnroll; ++k) {
          const int64_t rr = r + int64_t(k) * lanes;
          if (rr < r1) static_cast<T*>(L.y)[yb + row_offset(L, L.ys, rr)] = from_compute<T>((v[k] - mean) * k1 + k2);
        }
      }
    } else {
      const int64_t gb = n * L.gys[0] + c * L.gys[1], ob = n * L.gxs[0] + c * L.gxs[1];
      for (int64_t r = r0 + ty; r < r1; r += kColUnroll * lanes) {
        C dy[kColUnroll], xv[kColUnroll];
#pragma unroll
        for (int k = 0; k < kColUnroll; ++k) {
          const int64_t rr = r + int64_t(k) * lanes;
          dy[k] = rr < r1 ? ld<T, C>(L.gy, gb + row_offset(L, L.gys, rr)) : C(0);
          xv[k] = rr < r1 ? ld<T, C>(L.x, xb + row_offset(L, L.xs, rr)) : C(0);
        }
#pragma unroll
        for (int k = 0; k < kColUnroll; ++k) {
          const int64_t rr = r + int64_t(k) * lanes;
          if (rr < r1) static_cast<T*>(L.gx)[ob + row_offset(L, L.gxs, rr)] = from_compute<T>(k1 * dy[k] - k2 - (xv[k] - mean) * k3);
        }
      }
    }
  }
}

// Vector path of apply_columns (L.cvec): the partition of stats_columns_vec, 4 blocks per SM (64
// registers). Rows are held as packed words; for 16-bit types the per-channel coefficients fold
// into fewer registers (forward y = x * k1 + (k2 - mean * k1), backward grad_x = k1 * dy - k3 * x
// + (mean * k3 - k2)): the fold's f32 rounding is far below the 16-bit result's. Wider types keep
// the (x - mean) forms.
constexpr int kApplyVecMinBlocks = 4;
template <class T, bool BWD>
__global__ void __launch_bounds__(kChanThreads, kApplyVecMinBlocks) apply_columns_vec(const ChanNormLaunch L) {
  using C = compute_t<T>;
  constexpr int V = int(16 / sizeof(T));
  constexpr int U = BWD ? kColVecUnroll / 2 : kColVecUnroll;  // backward holds dy and x
  const Pointers<C> W = ws<C>(L);
  const int VT = L.part.vtile;
  const int lanes = kChanThreads / VT;
  const int tx = threadIdx.x % VT, ty = threadIdx.x / VT;
  const int64_t P = L.part.P, CR = L.part.chunk;
  const int64_t col_tiles = (L.C / V + VT - 1) / VT;
  for (int64_t task = blockIdx.x; task < L.part.vtasks; task += gridDim.x) {
    int64_t tile, rest, p, n;
    divmod(task, col_tiles, rest, tile);
    divmod(rest, P, n, p);
    const int64_t c = (tile * VT + tx) * V;
    if (c >= L.C) continue;  // no block-wide sync in this kernel
    const int64_t r0 = p * CR, r1 = min(L.S, r0 + CR);
    constexpr bool kFold = sizeof(T) == 2;
    C mean[V], k1[V], k2[V], k3[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      C e[4];
      ld_entry(W.table, entry_of(L, n, c + k), e);
      mean[k] = e[0]; k1[k] = e[1]; k2[k] = e[2]; k3[k] = e[3];
      if constexpr (kFold) k2[k] = BWD ? mean[k] * k3[k] - k2[k] : k2[k] - mean[k] * k1[k];
    }
    // Rows as packed 16-byte words (4 registers each for 16-bit types), walked by pointers.
    const int64_t r = r0 + ty, rstep = int64_t(U) * lanes;
    if (r >= r1) continue;
    const T* px = static_cast<const T*>(L.x) + n * L.xs[0] + c + r * L.xs[2];
    const int64_t xstep = lanes * L.xs[2];
    if constexpr (!BWD) {
      T* py = static_cast<T*>(L.y) + n * L.ys[0] + c + r * L.ys[2];
      const int64_t ystep = lanes * L.ys[2];
#pragma unroll 1  // U rows in flight per iteration
      for (int64_t rr = r; rr < r1; rr += rstep, px += U * xstep, py += U * ystep) {
        uint4 raw[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (rr + int64_t(u) * lanes < r1) raw[u] = *reinterpret_cast<const uint4*>(px + u * xstep);
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (rr + int64_t(u) * lanes < r1) {
            uint4 o;
#pragma unroll
            for (int k = 0; k < V; ++k) {
              const C xk = unpack<T>(raw[u], k);
              pack_into<T>(o, k, kFold ? xk * k1[k] + k2[k] : (xk - mean[k]) * k1[k] + k2[k]);
            }
            *reinterpret_cast<uint4*>(py + u * ystep) = o;
          }
        }
      }
    } else {
      const T* pg = static_cast<const T*>(L.gy) + n * L.gys[0] + c + r * L.gys[2];
      T* po = static_cast<T*>(L.gx) + n * L.gxs[0] + c + r * L.gxs[2];
      const int64_t gstep = lanes * L.gys[2], ostep = lanes * L.gxs[2];
#pragma unroll 1  // U rows in flight per iteration
      for (int64_t rr = r; rr < r1; rr += rstep, px += U * xstep, pg += U * gstep, po += U * ostep) {
        uint4 dy[U], xv[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (rr + int64_t(u) * lanes < r1) {
            dy[u] = *reinterpret_cast<const uint4*>(pg + u * gstep);
            xv[u] = *reinterpret_cast<const uint4*>(px + u * xstep);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (rr + int64_t(u) * lanes < r1) {
            uint4 o;
#pragma unroll
            for (int k = 0; k < V; ++k) {
              const C g = unpack<T>(dy[u], k), xk = unpack<T>(xv[u], k);
              pack_into<T>(o, k, kFold ? k1[k] * g - k3[k] * xk + k2[k] : k1[k] * g - k2[k] - (xk - mean[k]) * k3[k]);
            }
            *reinterpret_cast<uint4*>(po + u * ostep) = o;
          }
        }
      }
    }
  }
}

inline unsigned small_grid(int64_t n) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(chan_ceil_div(n, kChanThreads), kChanMaxGrid)));
}

template <class T, bool BWD> void stats(const ChanNormLaunch& L, cudaStream_t s) {
  if (L.part.columns && L.cvec) {
    stats_columns_vec<T, BWD><<<unsigned(L.part.vgrid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.stats_columns_vec");
  } else if (L.part.columns) {
    stats_columns<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.stats_columns");
  } else {
    if (L.vec) stats_planes_vec<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    else stats_planes_scalar<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.stats_planes");
  }
}
template <class T, bool BWD> void apply(const ChanNormLaunch& L, cudaStream_t s) {
  if (L.part.columns && L.cvec) {
    apply_columns_vec<T, BWD><<<unsigned(L.part.vgrid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.apply_columns_vec");
  } else if (L.part.columns) {
    apply_columns<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.apply_columns");
  } else {
    if (L.vec) apply_planes_vec<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    else apply_planes_scalar<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.apply_planes");
  }
}

}  // namespace baracuda::norm::chan

namespace baracuda::norm {

// The whole pass sequence of one run; N, C, S >= 1 (the plan handles empty tensors).
template <class T> void chan_launch_t(const ChanNormLaunch& L0, void* stream) {
  using namespace chan;
  ChanNormLaunch L = L0;
  const ChanWorkspace w = chan_workspace(L.dtype, L.part, L.N, L.C, L.per_channel);
  char* base = static_cast<char*>(L.workspace);
  L.partials = base;
  L.table = base + w.partials;
  L.aux = base + w.partials + w.table;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // The finalize / running-table view: with folded columns ([1, C * S, N] in the stats and apply
  // passes) [fold, C, N], so that a channel's partials are fold x P (its S columns) and its count
  // is fold x N; otherwise the same view.
  ChanNormLaunch F = L;
  if (L.fold) {
    F.N = L.fold;
    F.C = L.C / L.fold;
    F.fold = 0;
  }
  const int64_t units = F.per_channel ? F.C : F.N * F.G;
  const unsigned ugrid = unsigned(std::min<int64_t>(units, kChanMaxGrid));
  // Many units with few partials each: a warp per unit (see finalize_forward_warps).
  const int64_t span = F.per_channel ? F.N * F.part.P : (F.C / F.G) * F.part.P;
  const bool warp_units = units >= 1024 && span <= 256;
  const unsigned wgrid = unsigned(std::min<int64_t>(chan_ceil_div(units, kWarps), kChanMaxGrid));
  auto finalize_fwd = [&] {
    if (warp_units) finalize_forward_warps<T><<<wgrid, kChanThreads, 0, s>>>(F, units);
    else finalize_forward<T><<<ugrid, kChanThreads, 0, s>>>(F, units);
    check_launch("norm.channel.finalize_forward");
  };
  auto finalize_bwd = [&] {
    if (warp_units) finalize_backward_warps<T><<<wgrid, kChanThreads, 0, s>>>(F, units);
    else finalize_backward<T><<<ugrid, kChanThreads, 0, s>>>(F, units);
    check_launch("norm.channel.finalize_backward");
  };
  switch (L.mode) {
    case ChanMode::Forward:
      stats<T, false>(L, s);
      finalize_fwd();
      if (L.update_running && !L.per_channel) {
        instance_running<T><<<small_grid(L.C), kChanThreads, 0, s>>>(L);
        check_launch("norm.channel.instance_running");
      }
      apply<T, false>(L, s);
      break;
    case ChanMode::ForwardRunning:
      running_table<T><<<small_grid(F.C), kChanThreads, 0, s>>>(F);
      check_launch("norm.channel.running_table");
      apply<T, false>(L, s);
      break;
    case ChanMode::Backward:
      stats<T, true>(L, s);
      finalize_bwd();
      if (!L.per_channel && (L.gw || L.gb)) {
        group_weight_grads<T><<<small_grid(L.C), kChanThreads, 0, s>>>(L);
        check_launch("norm.channel.group_weight_grads");
      }
      apply<T, true>(L, s);
      break;
    case ChanMode::BackwardRunning:
      running_table<T><<<small_grid(F.C), kChanThreads, 0, s>>>(F);
      check_launch("norm.channel.running_table");
      if (L.gw || L.gb) {
        stats<T, true>(L, s);
        finalize_bwd();
      }
      apply<T, true>(L, s);
      break;
  }
}

}  // namespace baracuda::norm

#define BARACUDA_CHAN_NORM_INSTANTIATE(T) \
  template void baracuda::norm::chan_launch_t<T>(const baracuda::norm::ChanNormLaunch&, void*);
