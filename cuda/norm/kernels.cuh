// RMSNorm / LayerNorm kernels, forward and backward. Included only by the per-dtype translation
// units (norm_<dtype>.cu), which instantiate launch_forward<T> / launch_backward<T>.
//
// Rows are [rows, H] with unit column stride and a per-tensor row stride. A row is handled by
// a group of TPR threads: 8 / 16 / 32 (several rows per 128-thread block) or a whole block
// (128..1024). Half types compute in f32, f64 in f64; one rounding to the output. Every sum has
// a fixed order (butterfly shuffles, then warps in index order), so results are deterministic.
#pragma once
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "norm/kernels.h"
#include "norm/norm_launch.h"

namespace baracuda::norm::kern {
using namespace baracuda::kernels;

template <class U, int K> struct alignas(sizeof(U) * K) Pack { U v[K]; };

// N consecutive elements of U at p (16-byte aligned when N * sizeof(U) >= 16) -> compute type.
template <int N, class U, class C> __device__ __forceinline__ void load_n(const U* p, C* out) {
  constexpr int K = (N * sizeof(U) >= 16) ? int(16 / sizeof(U)) : N;
#pragma unroll
  for (int c = 0; c < N; c += K) {
    const Pack<U, K> v = *reinterpret_cast<const Pack<U, K>*>(p + c);
#pragma unroll
    for (int k = 0; k < K; ++k) out[c + k] = C(to_compute(v.v[k]));
  }
}
template <int N, class U, class C> __device__ __forceinline__ void store_n(U* p, const C* in) {
  constexpr int K = (N * sizeof(U) >= 16) ? int(16 / sizeof(U)) : N;
#pragma unroll
  for (int c = 0; c < N; c += K) {
    Pack<U, K> v;
#pragma unroll
    for (int k = 0; k < K; ++k) v.v[k] = from_compute<U>(in[c + k]);
    *reinterpret_cast<Pack<U, K>*>(p + c) = v;
  }
}
// weight / bias: T or f32, chosen at run time (a uniform branch).
template <int N, class T, class C> __device__ __forceinline__ void load_param(const void* p, bool f32, int64_t col, C* out) {
  if (f32) load_n<N>(static_cast<const float*>(p) + col, out);
  else load_n<N>(static_cast<const T*>(p) + col, out);
}

template <class C> __device__ __forceinline__ C inv_sqrt(C v) { return C(1) / sqrt(v); }  // correctly rounded sqrt and divide

// Sum over the TPR threads of a row group; every thread of the group gets the same bits.
// `red` is 32 shared slots (block groups only); callers alternate slot sets between rows.
template <int TPR, class C> __device__ __forceinline__ C group_sum(C v, C* red) {
  constexpr int W = TPR < 32 ? TPR : 32;
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if constexpr (TPR > 32) {
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    C s = 0;
#pragma unroll
    for (int i = 0; i < TPR / 32; ++i) s += red[i];
    return s;
  } else {
    return v;
  }
}
template <int TPR, class C> __device__ __forceinline__ void group_sum2(C& a, C& b, C* red) {
  constexpr int W = TPR < 32 ? TPR : 32;
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, o);
    b += __shfl_xor_sync(0xffffffffu, b, o);
  }
  if constexpr (TPR > 32) {
    if ((threadIdx.x & 31) == 0) { red[threadIdx.x >> 5] = a; red[32 + (threadIdx.x >> 5)] = b; }
    __syncthreads();
    C s = 0, t = 0;
#pragma unroll
    for (int i = 0; i < TPR / 32; ++i) { s += red[i]; t += red[32 + i]; }
    a = s; b = t;
  }
}

// x (+ residual, rounded once to T and written to residual_out): the value that is normalized.
template <int N, class T, class C>
__device__ __forceinline__ void load_h(const NormLaunch& L, int64_t row, int64_t col, C* h) {
  load_n<N>(static_cast<const T*>(L.x) + row * L.x_rs + col, h);
  if (L.res) {
    C r[N];
    load_n<N>(static_cast<const T*>(L.res) + row * L.res_rs + col, r);
#pragma unroll
    for (int k = 0; k < N; ++k) h[k] = C(to_compute(from_compute<T>(h[k] + r[k])));
    store_n<N>(static_cast<T*>(L.res_out) + row * L.res_out_rs + col, h);
  }
}

template <int N, class T, class C>
__device__ __forceinline__ void store_y(const NormLaunch& L, int64_t row, int64_t col, const C* h, C mean, C rstd) {
  C y[N], w[N], b[N];
#pragma unroll
  for (int k = 0; k < N; ++k) y[k] = (h[k] - mean) * rstd;
  if (L.w) {
    load_param<N, T>(L.w, L.w_f32, col, w);
#pragma unroll
    for (int k = 0; k < N; ++k) y[k] *= w[k];
  }
  if (L.b) {
    load_param<N, T>(L.b, L.b_f32, col, b);
#pragma unroll
    for (int k = 0; k < N; ++k) y[k] += b[k];
  }
  store_n<N>(static_cast<T*>(L.y) + row * L.y_rs + col, y);
}

constexpr int block_threads(int tpr) { return tpr > 32 ? tpr : 128; }

// ---- forward, row in registers ------------------------------------------------------------------
template <class T, int TPR, int I>
__global__ void __launch_bounds__(block_threads(TPR)) fwd_reg(const NormLaunch L) {
  using C = compute_t<T>;
  constexpr int V = 16 / sizeof(T);
  constexpr int RPB = TPR > 32 ? 1 : 128 / TPR;
  __shared__ C red[2][2][32];
  const int lane = threadIdx.x % TPR, group = threadIdx.x / TPR;
  const int64_t H = L.H;
  const C invH = C(1) / C(H), eps = C(L.eps);
  int parity = 0;
  for (int64_t base = int64_t(blockIdx.x) * RPB; base < L.rows; base += int64_t(gridDim.x) * RPB, parity ^= 1) {
    const int64_t row = base + group;
    const bool valid = row < L.rows;
    C h[I][V];
    bool ok[I];
    C s = 0;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      ok[i] = valid && col < H;
      if (ok[i]) {
        load_h<V, T>(L, row, col, h[i]);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) h[i][k] = 0;
      }
#pragma unroll
      for (int k = 0; k < V; ++k) s += L.layer ? h[i][k] : h[i][k] * h[i][k];
    }
    s = group_sum<TPR>(s, red[parity][0]);
    C mean = 0, rstd;
    if (L.layer) {
      mean = s * invH;
      C d = 0;
#pragma unroll
      for (int i = 0; i < I; ++i)
        if (ok[i]) {
#pragma unroll
          for (int k = 0; k < V; ++k) d += (h[i][k] - mean) * (h[i][k] - mean);
        }
      d = group_sum<TPR>(d, red[parity][1]);
      rstd = inv_sqrt(d * invH + eps);
    } else {
      rstd = inv_sqrt(s * invH + eps);
    }
    if (valid && lane == 0 && L.save_stats) {
      static_cast<C*>(L.rstd)[row] = rstd;
      if (L.layer) static_cast<C*>(L.mean)[row] = mean;
    }
#pragma unroll
    for (int i = 0; i < I; ++i)
      if (ok[i]) store_y<V, T>(L, row, int64_t(i * TPR + lane) * V, h[i], mean, rstd);
  }
}

// ---- forward, looped (any H, any alignment; re-reads the row) -----------------------------------
template <class T, int TPR, int V>
__global__ void __launch_bounds__(block_threads(TPR)) fwd_loop(const NormLaunch L) {
  using C = compute_t<T>;
  constexpr int RPB = TPR > 32 ? 1 : 128 / TPR;
  __shared__ C red[2][2][32];
  const int lane = threadIdx.x % TPR, group = threadIdx.x / TPR;
  const int64_t H = L.H;
  const C invH = C(1) / C(H), eps = C(L.eps);
  // After the first pass the normalized value lives in residual_out (fused) or x.
  const T* src = static_cast<const T*>(L.res ? L.res_out : L.x);
  const int64_t src_rs = L.res ? L.res_out_rs : L.x_rs;
  int parity = 0;
  for (int64_t base = int64_t(blockIdx.x) * RPB; base < L.rows; base += int64_t(gridDim.x) * RPB, parity ^= 1) {
    const int64_t row = base + group;
    const bool valid = row < L.rows;
    C s = 0;
    if (valid)
      for (int64_t col = int64_t(lane) * V; col < H; col += int64_t(TPR) * V) {
        C h[V];
        load_h<V, T>(L, row, col, h);
#pragma unroll
        for (int k = 0; k < V; ++k) s += L.layer ? h[k] : h[k] * h[k];
      }
    s = group_sum<TPR>(s, red[parity][0]);
    C mean = 0, rstd;
    if (L.layer) {
      mean = s * invH;
      C d = 0;
      if (valid)
        for (int64_t col = int64_t(lane) * V; col < H; col += int64_t(TPR) * V) {
          C h[V];
          load_n<V>(src + row * src_rs + col, h);
#pragma unroll
          for (int k = 0; k < V; ++k) d += (h[k] - mean) * (h[k] - mean);
        }
      d = group_sum<TPR>(d, red[parity][1]);
      rstd = inv_sqrt(d * invH + eps);
    } else {
      rstd = inv_sqrt(s * invH + eps);
    }
    if (!valid) continue;
    if (lane == 0 && L.save_stats) {
      static_cast<C*>(L.rstd)[row] = rstd;
      if (L.layer) static_cast<C*>(L.mean)[row] = mean;
    }
    for (int64_t col = int64_t(lane) * V; col < H; col += int64_t(TPR) * V) {
      C h[V];
      load_n<V>(src + row * src_rs + col, h);
      store_y<V, T>(L, row, col, h, mean, rstd);
    }
  }
}

// ---- backward -------------------------------------------------------------------------------------
// Per row, with xhat = (x - mean) * rstd (mean = 0 for RMSNorm) and g = grad_out * weight:
//   grad_x = rstd * (g - mean(g) [LayerNorm only] - xhat * mean(g * xhat)) (+ grad_residual)
//   grad_weight = sum over rows of grad_out * xhat, grad_bias = sum over rows of grad_out.

// One vector of a row: loads grad_out and x, returns g and xhat, adds to the row sums.
template <int N, class T, class C>
__device__ __forceinline__ void bwd_load(const NormLaunch& L, int64_t row, int64_t col, C mean, C rstd, C* gy, C* g,
                                         C* xh, C& s1, C& s2) {
  load_n<N>(static_cast<const T*>(L.gy) + row * L.gy_rs + col, gy);
  load_n<N>(static_cast<const T*>(L.x) + row * L.x_rs + col, xh);
  C w[N];
  if (L.w) load_param<N, T>(L.w, L.w_f32, col, w);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    xh[k] = (xh[k] - mean) * rstd;
    g[k] = L.w ? gy[k] * w[k] : gy[k];
    s1 += g[k];
    s2 += g[k] * xh[k];
  }
}
template <int N, class T, class C>
__device__ __forceinline__ void bwd_store(const NormLaunch& L, int64_t row, int64_t col, C rstd, C c1, C c2, const C* g,
                                          const C* xh) {
  C dx[N];
#pragma unroll
  for (int k = 0; k < N; ++k) dx[k] = rstd * (g[k] - c1 - xh[k] * c2);
  if (L.gres) {
    C r[N];
    load_n<N>(static_cast<const T*>(L.gres) + row * L.gres_rs + col, r);
#pragma unroll
    for (int k = 0; k < N; ++k) dx[k] += r[k];
  }
  store_n<N>(static_cast<T*>(L.gx) + row * L.gx_rs + col, dx);
}

template <class T> __device__ __forceinline__ compute_t<T>* partial_w(const NormLaunch& L) {
  return static_cast<compute_t<T>*>(L.workspace);
}
template <class T> __device__ __forceinline__ compute_t<T>* partial_b(const NormLaunch& L) {
  return reinterpret_cast<compute_t<T>*>(static_cast<char*>(L.workspace) + L.bias_partial_offset);
}

// Row in registers; the block's share of dweight / dbias stays in registers across its rows and
// is written once, as row blockIdx.x of the [partials, H] workspace.
template <class T, int TPR, int I>
__global__ void __launch_bounds__(block_threads(TPR)) bwd_reg(const NormLaunch L) {
  using C = compute_t<T>;
  constexpr int V = 16 / sizeof(T);
  constexpr int RPB = TPR > 32 ? 1 : 128 / TPR;
  constexpr int SPAN = TPR * I * V;  // padded row length
  __shared__ C red[2][64];
  const int lane = threadIdx.x % TPR, group = threadIdx.x / TPR;
  const int64_t H = L.H;
  const C invH = C(1) / C(H);
  C aw[I][V], ab[I][V];
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int k = 0; k < V; ++k) aw[i][k] = ab[i][k] = 0;
  int parity = 0;
  for (int64_t base = int64_t(blockIdx.x) * RPB; base < L.rows; base += int64_t(gridDim.x) * RPB, parity ^= 1) {
    const int64_t row = base + group;
    const bool valid = row < L.rows;
    const C mean = (valid && L.layer) ? static_cast<const C*>(L.mean)[row] : C(0);
    const C rstd = valid ? static_cast<const C*>(L.rstd)[row] : C(0);
    C gy[I][V], g[I][V], xh[I][V];
    bool ok[I];
    C s1 = 0, s2 = 0;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      ok[i] = valid && col < H;
      if (ok[i]) {
        bwd_load<V, T>(L, row, col, mean, rstd, gy[i], g[i], xh[i], s1, s2);
#pragma unroll
        for (int k = 0; k < V; ++k) { aw[i][k] += gy[i][k] * xh[i][k]; ab[i][k] += gy[i][k]; }
      }
    }
    group_sum2<TPR>(s1, s2, red[parity]);
    const C c1 = L.layer ? s1 * invH : C(0), c2 = s2 * invH;
#pragma unroll
    for (int i = 0; i < I; ++i)
      if (ok[i]) bwd_store<V, T>(L, row, int64_t(i * TPR + lane) * V, rstd, c1, c2, g[i], xh[i]);
  }
  if (!L.gw && !L.gb) return;
  C* pw = partial_w<T>(L) + int64_t(blockIdx.x) * H;
  C* pb = partial_b<T>(L) + int64_t(blockIdx.x) * H;
  if constexpr (TPR > 32) {
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      if (col < H) {
        if (L.gw) store_n<V>(pw + col, aw[i]);
        if (L.gb) store_n<V>(pb + col, ab[i]);
      }
    }
  } else {
    // Several row groups per block: add their sums in group order through shared memory.
    __shared__ C sw[RPB * SPAN], sb[RPB * SPAN];
#pragma unroll
    for (int i = 0; i < I; ++i)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        sw[group * SPAN + (i * TPR + lane) * V + k] = aw[i][k];
        sb[group * SPAN + (i * TPR + lane) * V + k] = ab[i][k];
      }
    __syncthreads();
    for (int c = threadIdx.x; c < H; c += blockDim.x) {
      C tw = 0, tb = 0;
#pragma unroll
      for (int gi = 0; gi < RPB; ++gi) { tw += sw[gi * SPAN + c]; tb += sb[gi * SPAN + c]; }
      if (L.gw) pw[c] = tw;
      if (L.gb) pb[c] = tb;
    }
  }
}

// Looped: grad_x only (two passes over grad_out and x); dweight / dbias come from colred.
template <class T, int TPR, int V>
__global__ void __launch_bounds__(block_threads(TPR)) bwd_loop(const NormLaunch L) {
  using C = compute_t<T>;
  constexpr int RPB = TPR > 32 ? 1 : 128 / TPR;
  __shared__ C red[2][64];
  const int lane = threadIdx.x % TPR, group = threadIdx.x / TPR;
  const int64_t H = L.H;
  const C invH = C(1) / C(H);
  int parity = 0;
  for (int64_t base = int64_t(blockIdx.x) * RPB; base < L.rows; base += int64_t(gridDim.x) * RPB, parity ^= 1) {
    const int64_t row = base + group;
    const bool valid = row < L.rows;
    const C mean = (valid && L.layer) ? static_cast<const C*>(L.mean)[row] : C(0);
    const C rstd = valid ? static_cast<const C*>(L.rstd)[row] : C(0);
    C s1 = 0, s2 = 0;
    if (valid)
      for (int64_t col = int64_t(lane) * V; col < H; col += int64_t(TPR) * V) {
        C gy[V], g[V], xh[V];
        bwd_load<V, T>(L, row, col, mean, rstd, gy, g, xh, s1, s2);
      }
    group_sum2<TPR>(s1, s2, red[parity]);
    if (!valid) continue;
    const C c1 = L.layer ? s1 * invH : C(0), c2 = s2 * invH;
    for (int64_t col = int64_t(lane) * V; col < H; col += int64_t(TPR) * V) {
      C gy[V], g[V], xh[V], t1 = 0, t2 = 0;
      bwd_load<V, T>(L, row, col, mean, rstd, gy, g, xh, t1, t2);
      bwd_store<V, T>(L, row, col, rstd, c1, c2, g, xh);
    }
  }
}

// dweight / dbias partials of the looped path: block (x: 256 columns, y: a chunk of rows).
template <class T>
__global__ void __launch_bounds__(kColredThreads) colred(const NormLaunch L) {
  using C = compute_t<T>;
  const int64_t col = int64_t(blockIdx.x) * kColredThreads + threadIdx.x;
  if (col >= L.H) return;
  const int64_t r0 = int64_t(blockIdx.y) * L.cfg.rows_per_chunk;
  const int64_t r1 = r0 + L.cfg.rows_per_chunk < L.rows ? r0 + L.cfg.rows_per_chunk : L.rows;
  const T* gy = static_cast<const T*>(L.gy);
  const T* x = static_cast<const T*>(L.x);
  const C* mean = static_cast<const C*>(L.mean);
  const C* rstd = static_cast<const C*>(L.rstd);
  C aw = 0, ab = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const C g = to_compute(gy[r * L.gy_rs + col]);
    const C xh = (C(to_compute(x[r * L.x_rs + col])) - (L.layer ? mean[r] : C(0))) * rstd[r];
    aw += g * xh;
    ab += g;
  }
  if (L.gw) partial_w<T>(L)[int64_t(blockIdx.y) * L.H + col] = aw;
  if (L.gb) partial_b<T>(L)[int64_t(blockIdx.y) * L.H + col] = ab;
}

// out[col] = sum over p of part[p, col], in a fixed order: 32 strided slices, then the slices.
template <class C, class O>
__global__ void __launch_bounds__(1024) finish(const C* part, int64_t P, int64_t H, O* out) {
  __shared__ C sm[32][33];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  C s = 0;
  if (col < H)
    for (int64_t p = threadIdx.y; p < P; p += 32) s += part[p * H + col];
  sm[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < H) {
    C t = 0;
#pragma unroll
    for (int j = 0; j < 32; ++j) t += sm[j][threadIdx.x];
    out[col] = from_compute<O>(t);
  }
}

// ---- launchers ------------------------------------------------------------------------------------
template <class T> constexpr int imax_of(bool backward) {
  constexpr int v = int(16 / sizeof(T));
  constexpr int cs = int(sizeof(compute_t<T>));
  const int budget = backward ? 32 : 64;
  const int m = budget / (v * cs);
  return m < 1 ? 1 : (m > 4 ? 4 : m);
}

template <bool BWD, class T, int TPR, int I> void reg_kernel(const NormLaunch& L, cudaStream_t s) {
  if constexpr (BWD) bwd_reg<T, TPR, I><<<unsigned(L.cfg.grid), block_threads(TPR), 0, s>>>(L);
  else fwd_reg<T, TPR, I><<<unsigned(L.cfg.grid), block_threads(TPR), 0, s>>>(L);
}

template <bool BWD, class T, int TPR> bool reg_items(const NormLaunch& L, cudaStream_t s) {
  constexpr int M = imax_of<T>(BWD);
  switch (L.cfg.items) {
    case 1: reg_kernel<BWD, T, TPR, 1>(L, s); return true;
    case 2: if constexpr (M >= 2 && TPR >= 32) { reg_kernel<BWD, T, TPR, 2>(L, s); return true; } break;
    case 3: if constexpr (M >= 3 && TPR >= 32) { reg_kernel<BWD, T, TPR, 3>(L, s); return true; } break;
    case 4: if constexpr (M >= 4 && TPR >= 32) { reg_kernel<BWD, T, TPR, 4>(L, s); return true; } break;
  }
  return false;
}

template <bool BWD, class T> bool reg_launch(const NormLaunch& L, cudaStream_t s) {
  switch (L.cfg.tpr) {
    case 8: return reg_items<BWD, T, 8>(L, s);
    case 16: return reg_items<BWD, T, 16>(L, s);
    case 32: return reg_items<BWD, T, 32>(L, s);
    case 128: return reg_items<BWD, T, 128>(L, s);
    case 256: return reg_items<BWD, T, 256>(L, s);
    case 512: return reg_items<BWD, T, 512>(L, s);
    case 1024: return reg_items<BWD, T, 1024>(L, s);
  }
  return false;
}

template <bool BWD, class T> bool loop_launch(const NormLaunch& L, cudaStream_t s) {
  constexpr int VV = int(16 / sizeof(T));
  const unsigned g = unsigned(L.cfg.grid);
  const bool vec = L.cfg.vec > 1;
  if (L.cfg.tpr == 32) {
    if constexpr (BWD) { if (vec) bwd_loop<T, 32, VV><<<g, 128, 0, s>>>(L); else bwd_loop<T, 32, 1><<<g, 128, 0, s>>>(L); }
    else { if (vec) fwd_loop<T, 32, VV><<<g, 128, 0, s>>>(L); else fwd_loop<T, 32, 1><<<g, 128, 0, s>>>(L); }
    return true;
  }
  if (L.cfg.tpr == 512) {
    if constexpr (BWD) { if (vec) bwd_loop<T, 512, VV><<<g, 512, 0, s>>>(L); else bwd_loop<T, 512, 1><<<g, 512, 0, s>>>(L); }
    else { if (vec) fwd_loop<T, 512, VV><<<g, 512, 0, s>>>(L); else fwd_loop<T, 512, 1><<<g, 512, 0, s>>>(L); }
    return true;
  }
  return false;
}

template <class T, class C> void finish_one(const C* part, int64_t P, int64_t H, void* out, bool f32, cudaStream_t s) {
  const dim3 grid(unsigned(ceil_div(H, 32))), block(32, 32);
  if (f32) finish<C, float><<<grid, block, 0, s>>>(part, P, H, static_cast<float*>(out));
  else finish<C, T><<<grid, block, 0, s>>>(part, P, H, static_cast<T*>(out));
  check_launch("norm finish (grad_weight / grad_bias)");
}

template <class T> void launch_forward_impl(const NormLaunch& L, cudaStream_t s) {
  if (L.rows == 0 || L.H == 0) return;
  const bool ok = L.cfg.path == Path::Registers ? reg_launch<false, T>(L, s) : loop_launch<false, T>(L, s);
  if (!ok) throw Unsupported("norm: no forward kernel for this configuration (internal)");
  check_launch(L.cfg.path == Path::Registers ? "norm forward (registers)" : "norm forward (looped)");
}

template <class T> void launch_backward_impl(const NormLaunch& L, cudaStream_t s) {
  using C = compute_t<T>;
  if (L.rows > 0 && L.H > 0) {
    const bool ok = L.cfg.path == Path::Registers ? reg_launch<true, T>(L, s) : loop_launch<true, T>(L, s);
    if (!ok) throw Unsupported("norm: no backward kernel for this configuration (internal)");
    check_launch(L.cfg.path == Path::Registers ? "norm backward (registers)" : "norm backward (looped)");
    if (L.cfg.path == Path::Looped && (L.gw || L.gb)) {
      const dim3 grid(unsigned(ceil_div(L.H, kColredThreads)), unsigned(L.cfg.partials));
      colred<T><<<grid, kColredThreads, 0, s>>>(L);
      check_launch("norm backward column reduction");
    }
  }
  if (L.H == 0) return;
  const int64_t P = L.rows > 0 ? L.cfg.partials : 0;  // no rows: zero gradients
  const C* pw = static_cast<const C*>(L.workspace);
  const C* pb = reinterpret_cast<const C*>(static_cast<const char*>(L.workspace) + L.bias_partial_offset);
  if (L.gw) finish_one<T>(pw, P, L.H, L.gw, L.w_f32, s);
  if (L.gb) finish_one<T>(pb, P, L.H, L.gb, L.b_f32, s);
}

}  // namespace baracuda::norm::kern

namespace baracuda::norm {
template <class T> void launch_forward(const NormLaunch& L, void* s) {
  kern::launch_forward_impl<T>(L, static_cast<cudaStream_t>(s));
}
template <class T> void launch_backward(const NormLaunch& L, void* s) {
  kern::launch_backward_impl<T>(L, static_cast<cudaStream_t>(s));
}
}  // namespace baracuda::norm

// Explicit instantiation of one dtype's launchers (norm_<dtype>.cu).
#define BARACUDA_NORM_INSTANTIATE(T)                                                      \
  template void baracuda::norm::launch_forward<T>(const baracuda::norm::NormLaunch&, void*); \
  template void baracuda::norm::launch_backward<T>(const baracuda::norm::NormLaunch&, void*);
