// GroupNorm / InstanceNorm / BatchNorm: what the stats, finalize and apply passes share. See
// channel_norm.cuh.
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
template <class T, class C> __device__ __forceinline__ void ld_vec(const void* p, int64_t off, C* out) {
  using Vec16 = Pack<T, 16 / sizeof(T)>;
  const Vec16 u = *reinterpret_cast<const Vec16*>(static_cast<const T*>(p) + off);
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
// A plane task of the planes kernels: plane (n, c) and chunk p of its spatial range, [s0, s1)
// (task = (n * C + c) * P + p; P and the chunk length CL are L.part's, read once by the caller).
struct PlaneChunk {
  int64_t n, c, p, s0, s1;
};
__device__ __forceinline__ PlaneChunk plane_chunk(const ChanNormLaunch& L, int64_t task, int64_t P, int64_t CL) {
  PlaneChunk t;
  int64_t q;
  divmod(task, P, q, t.p);
  divmod(q, L.C, t.n, t.c);
  t.s0 = t.p * CL;
  t.s1 = min(L.S, t.s0 + CL);
  return t;
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

}  // namespace baracuda::norm::chan
