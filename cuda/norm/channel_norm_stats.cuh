// GroupNorm / InstanceNorm / BatchNorm: the stats pass (per-task partial sums). See channel_norm.cuh.
#pragma once
#include "norm/channel_norm_common.cuh"

namespace baracuda::norm::chan {
using namespace baracuda::kernels;

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
    const auto [n, c, p, s0, s1] = plane_chunk(L, task, P, CL);
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
    int64_t p = 0, q = 0, n = 0, c = 0;  // plane_chunk's decode, inactive groups at 0 (spelled out:
    if (active) {                         // through the helper this kernel's SASS changes)
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

}  // namespace baracuda::norm::chan
