// GroupNorm / InstanceNorm / BatchNorm: the apply pass (y, or grad_x, from the table). See
// channel_norm.cuh.
#pragma once
#include "norm/channel_norm_common.cuh"

namespace baracuda::norm::chan {
using namespace baracuda::kernels;

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
    const auto [n, c, p, s0, s1] = plane_chunk(L, task, P, CL);
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
    const auto [n, c, p, s0, s1] = plane_chunk(L, task, P, CL);
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

}  // namespace baracuda::norm::chan
