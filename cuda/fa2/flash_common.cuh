// What the flash forward and backward kernels share: the tile loader, the fragment loads (lane
// address math of ldmatrix for each operand form), and the score rule in the log2 domain.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/attention_common.cuh"
#include "common/async_copy.cuh"
#include "common/cuda_check.h"
#include "common/mma_sync.cuh"

namespace baracuda::attention::flash {

// The head dims the flash kernels are compiled for: CMake's BARACUDA_ATTENTION_HEAD_DIMS as a mask
// (64: 1, 96: 2, 128: 4, 256: 8; nvcc reads commas in -D values as a list). select() offers the
// flash kernels for these dims only; the others run cuDNN or the rowwise kernels.
#ifndef BARACUDA_FLASH_HEAD_DIM_MASK
#define BARACUDA_FLASH_HEAD_DIM_MASK 15
#endif
constexpr bool head_dim_built(int d) {
  const int bit = d == 64 ? 1 : d == 96 ? 2 : d == 128 ? 4 : d == 256 ? 8 : 0;
  return (BARACUDA_FLASH_HEAD_DIM_MASK & bit) != 0;
}

constexpr int kWarps = 4;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Rows [r0, r0 + ROWS) of an operand (row stride `stride`, D contiguous) into a tile padded to LD
// (ldmatrix's eight row addresses then hit distinct banks); rows at or past `n` are zero-filled.
template <int ROWS, int D, int LD, class T>
__device__ __forceinline__ void load_tile(T* tile, const T* base, int64_t stride, int64_t r0, int64_t n) {
  constexpr int kChunks = D / 8, kTotal = ROWS * kChunks, kThreads = kWarps * 32;
  constexpr int kIters = (kTotal + kThreads - 1) / kThreads;
  // A static trip count; when the block covers whole rows per step, row and chunk are one
  // division of threadIdx.x plus constants.
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    int r, cc;
    if constexpr (kThreads % kChunks == 0) {
      r = int(threadIdx.x) / kChunks + it * (kThreads / kChunks);
      cc = int(threadIdx.x) % kChunks;
    } else {
      const int c = int(threadIdx.x) + it * kThreads;
      if (kTotal % kThreads != 0 && c >= kTotal) break;
      r = c / kChunks;
      cc = c % kChunks;
    }
    if (kThreads % kChunks == 0 && kTotal % kThreads != 0 && r >= ROWS) break;
    const bool in = r0 + r < n;
    const T* src = base + (in ? (r0 + r) * stride : 0) + cc * 8;
    kernels::cp_async16_zfill(tile + r * LD + cc * 8, src, in);
  }
}

// The A operand (16 x 16) at rows r0.., cols k0.. of a row-major tile.
template <int LD, class T> __device__ __forceinline__ void load_a(unsigned (&a)[4], const T* tile, int r0, int k0) {
  const int lane = threadIdx.x & 31;
  kernels::ldmatrix_x4(a, tile + (r0 + (lane & 15)) * LD + k0 + (lane >> 4) * 8);
}
// B operands of n-tiles n0 and n0 + 8 (b[0..1], b[2..3]) at k0.. from a tile stored [n][k].
template <int LD, class T> __device__ __forceinline__ void load_b(unsigned (&b)[4], const T* tile, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  kernels::ldmatrix_x4(b, tile + (n0 + (lane & 7) + (lane >> 4) * 8) * LD + k0 + ((lane >> 3) & 1) * 8);
}
// The same from a tile stored [k][n] (transposed on load).
template <int LD, class T> __device__ __forceinline__ void load_b_trans(unsigned (&b)[4], const T* tile, int k0, int n0) {
  const int lane = threadIdx.x & 31;
  kernels::ldmatrix_x4_trans(b, tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n0 + (lane >> 4) * 8);
}
// The A operand of k-step kc from the C fragments of n-tiles 2 kc and 2 kc + 1, rounded to T.
template <class T, int N>
__device__ __forceinline__ void c_to_a(unsigned (&a)[4], const float (&c)[N][4], int kc) {
  a[0] = kernels::pack2<T>(c[2 * kc][0], c[2 * kc][1]);
  a[1] = kernels::pack2<T>(c[2 * kc][2], c[2 * kc][3]);
  a[2] = kernels::pack2<T>(c[2 * kc + 1][0], c[2 * kc + 1][1]);
  a[3] = kernels::pack2<T>(c[2 * kc + 1][2], c[2 * kc + 1][3]);
}

// The score rule of attention_launch.h in the log2 domain: x = score * log2(e), so p = exp2(x -
// lse * log2(e)). dscore: d score / d (q . k), for the backward.
struct Score {
  float scale_log2, cap_scale, cap_log2, slope_log2, scale;
  bool softcap, alibi;
  __device__ Score(const Geometry& g, const Pointers& p, int64_t b, int64_t h) {
    scale = float(g.scale);
    scale_log2 = scale * kLog2e;
    softcap = g.softcap > 0;
    cap_scale = softcap ? scale / float(g.softcap) : 0.f;
    cap_log2 = float(g.softcap) * kLog2e;
    alibi = g.alibi;
    slope_log2 = alibi ? static_cast<const float*>(p.alibi_slopes)[b * g.alibi_batch_stride + h] * kLog2e : 0.f;
  }
  // x = dot * scale_log2 alone (no softcap, no ALiBi, a positive scale): the kernels' fast path.
  __device__ __forceinline__ bool plain() const { return !softcap && !alibi && scale > 0.f; }
  __device__ __forceinline__ float operator()(float dot, int64_t pos, int64_t j) const {
    float x = softcap ? cap_log2 * tanhf(dot * cap_scale) : dot * scale_log2;
    if (alibi) x -= slope_log2 * float(pos > j ? pos - j : j - pos);
    return x;
  }
  __device__ __forceinline__ float operator()(float dot, int64_t pos, int64_t j, float& dscore) const {
    float x;
    if (softcap) {
      const float t = tanhf(dot * cap_scale);
      x = cap_log2 * t;
      dscore = scale * (1.f - t * t);
    } else {
      x = dot * scale_log2;
      dscore = scale;
    }
    if (alibi) x -= slope_log2 * float(pos > j ? pos - j : j - pos);
    return x;
  }
};

// The query tile of this block (BM rows; blocks run from the last tile when rows late in the
// sequence see more keys, causal / windowed, so the longest start first) and the key tiles of BN
// rows it sees, [nb_lo, nb_hi). False when the tile is past the sequence.
template <int BM, int BN>
__device__ __forceinline__ bool query_tile(const Geometry& g, const Seq& s, int64_t& i0, int64_t& i_last,
                                           int64_t& nb_lo, int64_t& nb_hi) {
  const int64_t mb = g.window_right >= 0 ? int64_t(gridDim.x) - 1 - blockIdx.x : blockIdx.x;
  i0 = mb * BM;
  if (i0 >= s.sq) return false;
  i_last = min(i0 + BM, s.sq) - 1;
  int64_t jlo, jhi, unused;
  visible_keys(g, s, i0, jlo, unused);
  visible_keys(g, s, i_last, unused, jhi);
  nb_lo = jlo / BN;
  nb_hi = jhi > jlo ? (jhi + BN - 1) / BN : nb_lo;
  return true;
}

// Every key of [j0, j_last] is in the sequence and visible to every query of [i0, i_last]: the
// tile needs no mask.
__device__ __forceinline__ bool tile_inside(const Geometry& g, const Seq& s, int64_t i0, int64_t i_last, int64_t j0,
                                            int64_t j_last) {
  return j_last < s.sk && (g.window_left < 0 || j0 >= i_last + s.off - g.window_left) &&
         (g.window_right < 0 || j_last <= i0 + s.off + g.window_right);
}

__device__ __forceinline__ bool visible(const Geometry& g, const Seq& s, int64_t pos, int64_t j) {
  return j < s.sk && (g.window_left < 0 || j >= pos - g.window_left) && (g.window_right < 0 || j <= pos + g.window_right);
}

// A kernel taking more than 48 KiB of dynamic shared memory must opt in, once per device.
template <auto kernel> void opt_in_smem(int bytes) {
  if (bytes <= 48 * 1024) return;
  static unsigned done = 0;  // one bit per device, per kernel
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev < 32 && (__atomic_load_n(&done, __ATOMIC_ACQUIRE) & (1u << dev))) return;
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "cudaFuncSetAttribute(flash attention)");
  if (dev < 32) __atomic_fetch_or(&done, 1u << dev, __ATOMIC_RELEASE);
}

}  // namespace baracuda::attention::flash
