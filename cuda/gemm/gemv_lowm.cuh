// Decode-regime GEMM (M = 1..16): out = alpha * x @ w^T + beta * out (+ bias), w [N, K]
// K-contiguous. Bound by streaming w once from HBM, so everything here is about keeping enough
// 16-byte loads of w in flight on every SM and spending few instructions per byte.
//
// Two kernels, both "split-K inside the block": a block owns a tile of rows of w (n) over the
// whole K; its kw warps each take a contiguous K slice (in chunks), accumulate in registers,
// and the partial sums meet in shared memory, summed in warp order (deterministic).
//
//  * gemv_mma_kernel<T, M16, RN> (bf16 / f16, 16-byte aligned): tensor-core mma.sync
//    m16n8k16 with x as the A operand (16 rows of x; rows >= M are clamped duplicates whose
//    results are discarded) and w as the B operand (8 rows of w per n8 tile, RN tiles per
//    block). Lane (g = lane/4, t = lane%4) loads 16 bytes = 8 consecutive k of w row g at
//    k0 + 8t, and 16 bytes of x rows g (and g + 8) at the same k. The 32 k of a chunk are fed
//    to two mma k16 steps under a permutation of k (k0 + 8t + {0,1 | 2,3 | 4,5 | 6,7} go to
//    slots {2t, 2t+1 | 2t+8, 2t+9} of the first / second step); the permutation is the same
//    for A and B, so the dot product is unchanged and no shuffles are needed. Per 16 bytes of
//    w a thread issues one mma, i.e. the math is free and the kernel is a pure stream of w.
//  * gemv_fma_kernel<T, MT, VEC> (f32, and the unaligned fallback of every dtype): lanes along
//    K (16-byte loads when VEC, else scalar), R rows per block, acc[MT][R] in registers, FMA in
//    f32, a butterfly warp reduction (commutative pairs: every lane gets the same bits), then
//    the shared-memory split-K reduction.
//
// Each kernel is a loop over tiles of a __device__ tile function (gemv_mma_tile /
// gemv_fma_tile: one tile of w rows against up to 16 rows of x, K loop, split-K reduction,
// epilogue); the grouped (mixture-of-experts) kernels of gemv_grouped.cuh run the same tile
// functions over (expert, tile, row chunk) work items.
//
// w is read with ld.global.nc.L1::no_allocate.L2::256B (read once, do not pollute L1, fetch
// whole 256-byte DRAM bursts); x with ld.global.nc (reused by every block: L1/L2 hits).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/mma_sync.cuh"
#include "gemm/gemm_launch.h"

namespace baracuda::gemm::detail {

// ---------------------------------------------------------------------------------------
// Host/device shared description of one launch configuration.
enum class GemvPath : int { Mma = 0, Fma = 1 };

struct GemvCfg {
  GemvPath path = GemvPath::Fma;
  bool vec = true;  // 16-byte loads of x and w (false: scalar fallback, Fma only)
  int mt = 1;       // M bucket: Mma {8, 16}; Fma {1, 2, 4, 8, 16}
  int rn = 1;       // Mma: n8 tiles per block (8 * rn rows of w); Fma: unused (fma_rows)
  int kw = 8;       // warps per block, each a K slice
};

// Fma kernel shape per (M bucket, vector): rows of w per block and chunks per warp iteration.
constexpr int fma_rows(int mt, bool /*vec*/) { return mt >= 16 ? 2 : 4; }
constexpr int fma_unroll(int mt, bool vec) {
  return vec ? (mt <= 2 ? 4 : (mt <= 8 ? 2 : 1)) : (mt <= 4 ? 4 : 2);
}
// Mma kernel: chunks (32 k each) per warp iteration (U x RN 16-byte loads of w per thread).
constexpr int mma_unroll(int rn) { return rn >= 4 ? 1 : (rn == 2 ? 2 : 4); }

constexpr int kGemvMaxWarps = 16;

// Rows of w per block, k per chunk (one load per lane per row), chunks per warp iteration.
inline int gemv_rows_per_block(const GemvCfg& c) {
  return c.path == GemvPath::Mma ? 8 * c.rn : fma_rows(c.mt, c.vec);
}
inline int gemv_chunk_k(const GemvCfg& c, int elem_size) {
  return c.path == GemvPath::Mma ? 32 : (c.vec ? 32 * (16 / elem_size) : 32);
}
inline int gemv_unroll(const GemvCfg& c) {
  return c.path == GemvPath::Mma ? mma_unroll(c.rn) : fma_unroll(c.mt, c.vec);
}
inline size_t gemv_smem_bytes(const GemvCfg& c) {
  const int per_warp = c.path == GemvPath::Mma ? c.rn * 4 * 32 : c.mt * fma_rows(c.mt, c.vec);
  return sizeof(float) * size_t(per_warp) * size_t(c.kw);
}

// Per-dtype entry points (one TU each, so they compile in parallel).
void gemv_launch_bf16(const GemvLowMArgs& a, const GemvCfg& c, void* stream);
void gemv_launch_f16(const GemvLowMArgs& a, const GemvCfg& c, void* stream);
void gemv_launch_f32(const GemvLowMArgs& a, const GemvCfg& c, void* stream);
// Resident blocks per SM for this configuration on the current device; 0 if unknown.
int gemv_occupancy_bf16(const GemvCfg& c);
int gemv_occupancy_f16(const GemvCfg& c);
int gemv_occupancy_f32(const GemvCfg& c);
// The dense dispatch's configuration for a (path from dtype and alignment, split from the
// launch model; no env override), and the current device's SM count (132 without a device).
// Defined in gemv_lowm_f32.cu; the grouped dispatch models its launch as a dense one.
GemvCfg gemv_model_cfg(const GemvLowMArgs& a);
int gemv_device_sms();
// Shared by the dense and grouped dispatchers (defined in gemv_lowm_f32.cu).
// Resident blocks per SM of one kernel family for c on device dev, from the family's per-dtype
// occupancy queries (bf16, f16, f32), memoized per (family, device, dtype, c); without a device
// an estimate of ~96 registers per thread.
using GemvOccupancyQuery = int (*)(const GemvCfg&);
int gemv_cached_occupancy(int family, DType dt, const GemvCfg& c, int dev, const GemvOccupancyQuery (&by_dtype)[3]);
int gemv_current_device();  // -1 without a device (select-time calls on a machine without a GPU)
// A configuration's SKU suffix after `family` ("gemv_lowm", "grouped_gemv"): path, rows, access, split;
// ".k0" when the product is all zeros (alpha 0 or K 0).
std::string gemv_variant_name(const char* family, const GemvCfg& c, bool k0);
int gemv_pow2_at_least(int64_t m);

// ---------------------------------------------------------------------------------------
// Device side.
struct GemvParams {
  const void* x;
  const void* w;
  void* out;
  const void* bias;
  int64_t ldx, ldw, ldo;
  int64_t N, K;     // K == 0 when alpha == 0 (x and w are not read)
  int64_t ntiles;   // ceil(N / rows per block)
  int M;
  float alpha, beta;
  int bias_f32;     // bias is f32 (else the output dtype)
};

// Streaming 16-byte load of w: non-coherent, no L1 allocation, 256-byte L2 fetch.
__device__ __forceinline__ uint4 ld_stream16(const void* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
}
// Cached 16-byte load of x (reused by all blocks).
__device__ __forceinline__ uint4 ld_cached16(const void* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

template <class T> using raw_t = std::conditional_t<sizeof(T) == 2, unsigned short, unsigned int>;

// Tail load: the 16 bytes at p when `valid`, else zeros (loading from `safe`, an in-bounds
// piece, so the instruction and its register footprint are those of the main loop).
template <bool STREAM>
__device__ __forceinline__ uint4 ld_tail(const void* p, const void* safe, bool valid) {
  const uint4 v = STREAM ? ld_stream16(valid ? p : safe) : ld_cached16(valid ? p : safe);
  return valid ? v : make_uint4(0u, 0u, 0u, 0u);
}

// Raw storage bits -> f32.
template <class T> __device__ __forceinline__ float raw_to_f(raw_t<T> r) {
  if constexpr (std::is_same_v<T, kernels::bf16>) return __uint_as_float(static_cast<unsigned>(r) << 16);
  else if constexpr (std::is_same_v<T, kernels::f16>) return __half2float(__ushort_as_half(r));
  else return __uint_as_float(r);
}
// 16 bytes -> V floats.
template <class T> __device__ __forceinline__ void unpack16(const uint4& v, float (&f)[16 / sizeof(T)]) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int j = 0; j < 4; ++j) f[j] = __uint_as_float(u[j]);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      f[2 * j] = raw_to_f<T>(static_cast<unsigned short>(u[j] & 0xffffu));
      f[2 * j + 1] = raw_to_f<T>(static_cast<unsigned short>(u[j] >> 16));
    }
  }
}

template <class T> __device__ __forceinline__ float elem_to_f(const T* p) {
  return raw_to_f<T>(*reinterpret_cast<const raw_t<T>*>(p));
}

// out[m, n] = alpha * s + beta * out[m, n] + bias[n], rounded once. `out` / `bias` are the
// tile's own (p.out / p.bias for the dense kernel; the expert's rows / bias row when grouped).
template <class T>
__device__ __forceinline__ void gemv_store(const GemvParams& p, T* out, const void* bias, int m,
                                           int64_t n, float s) {
  T* o = out + int64_t(m) * p.ldo + n;
  float v = p.alpha * s;
  if (p.beta != 0.0f) v = fmaf(p.beta, elem_to_f<T>(o), v);
  if (bias != nullptr)
    v += p.bias_f32 ? static_cast<const float*>(bias)[n] : elem_to_f<T>(static_cast<const T*>(bias) + n);
  *o = kernels::from_compute<T>(v);
}

// K range of warp `warp` of `kw`, in whole chunks of CH elements: [kb, kb + len), len may be <= 0.
__device__ __forceinline__ void warp_k_range(int64_t K, int CH, int warp, int kw, int64_t& kb,
                                             int64_t& len) {
  const int64_t nch = (K + CH - 1) / CH;
  const int64_t cb = nch * warp / kw, ce = nch * (warp + 1) / kw;
  kb = cb * CH;
  const int64_t ke = ce * CH < K ? ce * CH : K;
  len = ke - kb;
}

using kernels::mma16816;  // common/mma_sync.cuh

// One 32-k chunk: x rows g / g+8 (a_lo / a_hi) times w row g (b), both 8 consecutive k.
template <class T>
__device__ __forceinline__ void mma_chunk(float (&c)[4], const uint4& a_lo, const uint4& a_hi,
                                          const uint4& b) {
  mma16816<T>(c, a_lo.x, a_hi.x, a_lo.y, a_hi.y, b.x, b.y);
  mma16816<T>(c, a_lo.z, a_hi.z, a_lo.w, a_hi.w, b.z, b.w);
}

// One tile of the mma kernel: rows n0 .. n0 + 8 * RN - 1 of w (rows >= N clamped, never
// stored) against M (<= 16, or <= 8 without M16) rows of x, over this warp's K slice, then
// the block's split-K reduction and the epilogue into out (rows m < M, columns n < N).
//  * w: the matrix's row 0 (the expert's, when grouped); xlo / xhi: this lane's x pointers
//    (rows min(g, M-1) / min(g+8, M-1), column kb + 8t); kb, niter, rem: from warp_k_range.
// Every thread of the block calls it with the same tile (it synchronizes).
template <class T, bool M16, int RN>
__device__ __forceinline__ void gemv_mma_tile(const GemvParams& p, const T* w, const T* xlo,
                                              const T* xhi, int64_t kb, int64_t niter, int rem,
                                              int64_t n0, int M, T* out, const void* bias,
                                              float* red) {
  constexpr int U = mma_unroll(RN);
  constexpr int CH = 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const T* wr[RN];
#pragma unroll
  for (int r = 0; r < RN; ++r) {
    const int64_t n = n0 + 8 * r + g;  // rows >= N clamped: their columns are never stored
    wr[r] = w + (n < p.N ? n : p.N - 1) * p.ldw + kb + 8 * t;
  }
  float acc[RN][4];
#pragma unroll
  for (int r = 0; r < RN; ++r) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = 0.0f;

  // One iteration of U chunks. PRED (the last, partial iteration): chunk u is read iff
  // CH * u < rem (warp-uniform; rem is a multiple of 8, so pieces are whole or absent).
  auto step = [&](auto pred) {
    constexpr bool PRED = decltype(pred)::value;
    uint4 wv[U][RN], xl[U], xh[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < RN; ++r)
        wv[u][r] = PRED ? ld_tail<true>(wr[r] + CH * u, wr[r] - 8 * t, CH * u + 8 * t < rem)
                        : ld_stream16(wr[r] + CH * u);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      xl[u] = PRED ? ld_tail<false>(xlo + CH * u, xlo - 8 * t, CH * u + 8 * t < rem)
                   : ld_cached16(xlo + CH * u);
      if constexpr (M16)
        xh[u] = PRED ? ld_tail<false>(xhi + CH * u, xhi - 8 * t, CH * u + 8 * t < rem)
                     : ld_cached16(xhi + CH * u);
      else
        xh[u] = make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (!PRED || CH * u < rem)
#pragma unroll
        for (int r = 0; r < RN; ++r) mma_chunk<T>(acc[r], xl[u], xh[u], wv[u][r]);
  };
  for (int64_t it = 0; it < niter; ++it) {
    step(std::false_type{});
#pragma unroll
    for (int r = 0; r < RN; ++r) wr[r] += CH * U;
    xlo += CH * U;
    xhi += CH * U;
  }
  if (rem > 0) step(std::true_type{});

  // Split-K reduction, fixed warp order.
  float* mine = red + warp * (RN * 4 * 32);
#pragma unroll
  for (int r = 0; r < RN; ++r)
#pragma unroll
    for (int i = 0; i < 4; ++i) mine[(r * 4 + i) * 32 + lane] = acc[r][i];
  __syncthreads();
  for (int idx = threadIdx.x; idx < RN * 4 * 32; idx += blockDim.x) {
    const int r = idx >> 7, i = (idx >> 5) & 3, ln = idx & 31;
    if (!M16 && i >= 2) continue;
    const int m = (ln >> 2) + (i >= 2 ? 8 : 0);
    const int64_t n = n0 + 8 * r + 2 * (ln & 3) + (i & 1);
    if (m >= M || n >= p.N) continue;
    float s = 0.0f;
    for (int q = 0; q < kw; ++q) s += red[q * (RN * 4 * 32) + idx];
    gemv_store<T>(p, out, bias, m, n, s);
  }
  __syncthreads();
}

template <class T, bool M16, int RN>
__global__ void __launch_bounds__(32 * kGemvMaxWarps, 1)
gemv_mma_kernel(const GemvParams p) {
  constexpr int CH = 32;
  extern __shared__ float gemv_red[];  // [kw][RN * 4][32]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);

  int64_t kb, len;
  warp_k_range(p.K, CH, warp, kw, kb, len);
  constexpr int U = mma_unroll(RN);
  const int64_t niter = len > 0 ? len / (CH * U) : 0;           // whole iterations
  const int rem = len > 0 ? static_cast<int>(len - niter * (CH * U)) : 0;  // < CH * U
  // x rows >= M are clamped to M - 1: their products land in rows of the result never stored.
  const T* xlo0 = x + int64_t(g < p.M ? g : p.M - 1) * p.ldx + kb + 8 * t;
  const T* xhi0 = x + int64_t(g + 8 < p.M ? g + 8 : p.M - 1) * p.ldx + kb + 8 * t;

  for (int64_t tile = blockIdx.x; tile < p.ntiles; tile += gridDim.x)
    gemv_mma_tile<T, M16, RN>(p, w, xlo0, xhi0, kb, niter, rem, tile * (8 * RN), p.M,
                              static_cast<T*>(p.out), p.bias, gemv_red);
}

// One tile of the fma kernel: rows n0 .. n0 + R - 1 of w against M (<= MT) rows of x over
// this warp's K slice, then the split-K reduction and the epilogue (as gemv_mma_tile).
//  * x0: this lane's pointer into row 0 of the tile's x rows (column kb + V * lane).
template <class T, int MT, bool VEC>
__device__ __forceinline__ void gemv_fma_tile(const GemvParams& p, const T* w, const T* x0,
                                              int64_t kb, int64_t niter, int rem, int64_t n0,
                                              int M, T* out, const void* bias, float* red) {
  constexpr int R = fma_rows(MT, VEC), U = fma_unroll(MT, VEC);
  constexpr int V = VEC ? 16 / int(sizeof(T)) : 1;
  constexpr int CH = 32 * V;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = blockDim.x >> 5;
  const T* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t n = n0 + r;
    wr[r] = w + (n < p.N ? n : p.N - 1) * p.ldw + kb + V * lane;
  }
  int64_t off = 0;  // element offset of this iteration inside the warp's K slice
  float acc[MT][R];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = 0.0f;

  // One iteration of U chunks. PRED: the last, partial iteration; element i of chunk u is
  // read iff CH * u + V * lane + i < rem (VEC: rem is a multiple of V, so pieces are whole
  // or absent, and chunk u is skipped iff CH * u >= rem, warp-uniform).
  auto step = [&](auto pred) {
    constexpr bool PRED = decltype(pred)::value;
    if constexpr (VEC) {
      uint4 wv[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r)
          wv[u][r] = PRED ? ld_tail<true>(wr[r] + CH * u, wr[r] - V * lane, CH * u + V * lane < rem)
                          : ld_stream16(wr[r] + CH * u);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (PRED && CH * u >= rem) break;  // warp-uniform
        float wf[R][V];
#pragma unroll
        for (int r = 0; r < R; ++r) unpack16<T>(wv[u][r], wf[r]);
        const T* xm = x0 + off + CH * u;
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const uint4 xv = PRED ? ld_tail<false>(xm, xm - CH * u - V * lane, CH * u + V * lane < rem)
                                : ld_cached16(xm);
          if (m + 1 < M) xm += p.ldx;
          float xf[V];
          unpack16<T>(xv, xf);
#pragma unroll
          for (int r = 0; r < R; ++r)
#pragma unroll
            for (int j = 0; j < V; ++j) acc[m][r] = fmaf(xf[j], wf[r][j], acc[m][r]);
        }
      }
    } else {
      raw_t<T> wv[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r)
          wv[u][r] = (!PRED || CH * u + lane < rem)
                         ? __ldg(reinterpret_cast<const raw_t<T>*>(wr[r] + CH * u))
                         : raw_t<T>(0);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const bool ok = !PRED || CH * u + lane < rem;
        const T* xm = x0 + off + CH * u;
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const float xf = ok ? elem_to_f<T>(xm) : 0.0f;
          if (m + 1 < M) xm += p.ldx;
#pragma unroll
          for (int r = 0; r < R; ++r) acc[m][r] = fmaf(xf, raw_to_f<T>(wv[u][r]), acc[m][r]);
        }
      }
    }
  };
  // Iterations kept whole: the register tile is large already (unrolled, ptxas spills).
#pragma unroll 1
  for (int64_t it = 0; it < niter; ++it) {
    step(std::false_type{});
#pragma unroll
    for (int r = 0; r < R; ++r) wr[r] += CH * U;
    off += CH * U;
  }
  if (rem > 0) step(std::true_type{});

  // Warp reduction (butterfly: both partners add the same pair, so all lanes agree bitwise),
  // then the split-K reduction in warp order.
  float* mine = red + warp * (MT * R);
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = acc[m][r];
#pragma unroll
      for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
      if (lane == ((m * R + r) & 31)) mine[m * R + r] = v;
    }
  __syncthreads();
  for (int idx = threadIdx.x; idx < MT * R; idx += blockDim.x) {
    const int m = idx / R, r = idx % R;
    const int64_t n = n0 + r;
    if (m >= M || n >= p.N) continue;
    float s = 0.0f;
    for (int q = 0; q < kw; ++q) s += red[q * (MT * R) + idx];
    gemv_store<T>(p, out, bias, m, n, s);
  }
  __syncthreads();
}

template <class T, int MT, bool VEC>
__global__ void __launch_bounds__(32 * kGemvMaxWarps, 1)
gemv_fma_kernel(const GemvParams p) {
  constexpr int R = fma_rows(MT, VEC), U = fma_unroll(MT, VEC);
  constexpr int V = VEC ? 16 / int(sizeof(T)) : 1;
  constexpr int CH = 32 * V;
  extern __shared__ float gemv_red[];  // [kw][MT * R]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = blockDim.x >> 5;
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);

  int64_t kb, len;
  warp_k_range(p.K, CH, warp, kw, kb, len);
  const int64_t niter = len > 0 ? len / (CH * U) : 0;
  const int rem = len > 0 ? static_cast<int>(len - niter * (CH * U)) : 0;
  // Row m of x sits at x0 + min(m, M - 1) * ldx; walked with one pointer (rows >= M repeat
  // row M - 1, whose products land in rows never stored) to keep 64-bit pointers out of the
  // register budget.
  const T* x0 = x + kb + V * lane;

  for (int64_t tile = blockIdx.x; tile < p.ntiles; tile += gridDim.x)
    gemv_fma_tile<T, MT, VEC>(p, w, x0, kb, niter, rem, tile * R, p.M, static_cast<T*>(p.out),
                              p.bias, gemv_red);
}

// ---------------------------------------------------------------------------------------
// Host side, instantiated once per dtype TU.
using GemvKernel = void (*)(GemvParams);

template <class T> GemvKernel gemv_kernel_for(const GemvCfg& c) {
  if constexpr (kernels::is_half_v<T>) {
    if (c.path == GemvPath::Mma) {
      if (c.mt > 8) {
        if (c.rn == 1) return gemv_mma_kernel<T, true, 1>;
        if (c.rn == 2) return gemv_mma_kernel<T, true, 2>;
        return gemv_mma_kernel<T, true, 4>;
      }
      if (c.rn == 1) return gemv_mma_kernel<T, false, 1>;
      if (c.rn == 2) return gemv_mma_kernel<T, false, 2>;
      return gemv_mma_kernel<T, false, 4>;
    }
    // Halves take the Fma kernel only for unaligned data (aligned data takes Mma).
    switch (c.mt) {
      case 1: return gemv_fma_kernel<T, 1, false>;
      case 2: return gemv_fma_kernel<T, 2, false>;
      case 4: return gemv_fma_kernel<T, 4, false>;
      case 8: return gemv_fma_kernel<T, 8, false>;
      default: return gemv_fma_kernel<T, 16, false>;
    }
  } else {
    if (c.vec) {
      switch (c.mt) {
        case 1: return gemv_fma_kernel<T, 1, true>;
        case 2: return gemv_fma_kernel<T, 2, true>;
        case 4: return gemv_fma_kernel<T, 4, true>;
        case 8: return gemv_fma_kernel<T, 8, true>;
        default: return gemv_fma_kernel<T, 16, true>;
      }
    }
    switch (c.mt) {
      case 1: return gemv_fma_kernel<T, 1, false>;
      case 2: return gemv_fma_kernel<T, 2, false>;
      case 4: return gemv_fma_kernel<T, 4, false>;
      case 8: return gemv_fma_kernel<T, 8, false>;
      default: return gemv_fma_kernel<T, 16, false>;
    }
  }
}

template <class T> int gemv_occupancy_t(const GemvCfg& c) {
  int blocks = 0;
  const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, gemv_kernel_for<T>(c), 32 * c.kw, gemv_smem_bytes(c));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky; clear it so the next check_launch is not misled
    return 0;
  }
  return blocks;
}

template <class T> void gemv_launch_t(const GemvLowMArgs& a, const GemvCfg& c, void* stream) {
  GemvParams p;
  p.x = a.x;
  p.w = a.w;
  p.out = a.out;
  p.bias = a.bias;
  p.ldx = a.ldx;
  p.ldw = a.ldw;
  p.ldo = a.ldo;
  p.N = a.N;
  p.K = a.alpha == 0.0f ? 0 : a.K;
  const int64_t rows = gemv_rows_per_block(c);
  p.ntiles = (a.N + rows - 1) / rows;
  p.M = static_cast<int>(a.M);
  p.alpha = a.alpha;
  p.beta = a.beta;
  p.bias_f32 = a.bias != nullptr && a.bias_dtype == DType::Float32;
  const int64_t max_grid = 0x7fffffff;
  const unsigned grid = static_cast<unsigned>(p.ntiles < max_grid ? p.ntiles : max_grid);
  GemvKernel k = gemv_kernel_for<T>(c);
  k<<<grid, 32 * c.kw, gemv_smem_bytes(c), static_cast<cudaStream_t>(stream)>>>(p);
  check_launch(c.path == GemvPath::Mma ? "gemv_lowm_mma_kernel" : "gemv_lowm_fma_kernel");
}

}  // namespace baracuda::gemm::detail
