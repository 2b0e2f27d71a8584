// What the flash forward and backward kernels share: the tile loader, the fragment loads (lane
// address math of ldmatrix for each operand form), and the score rule in the log2 domain.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/attention_common.cuh"
#include "common/async_copy.cuh"
#include "common/cuda_check.h"
#include "common/fast_exp.cuh"
#include "common/mma_sync.cuh"
#include "common/smem_opt_in.h"

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
// The same B operands from a tile whose rows are unpadded and swizzled (W elements a row, a multiple
// of 64): 16-byte chunk j of row r stored at chunk j ^ (r % 8). Rows stay 128-byte aligned, so a row's
// async copies request each L2 sector once (padded rows asked for 1.5x the sectors on paged decode:
// docs/benchmark-notes.md), and ldmatrix's eight rows still hit distinct banks.
template <int W> __device__ __forceinline__ int swizzled_offset(int r, int c) {
  return r * W + (((c >> 3) ^ (r & 7)) << 3) + (c & 7);
}
template <int W, class T> __device__ __forceinline__ T* swizzled_at(T* tile, int r, int c) {
  return tile + swizzled_offset<W>(r, c);
}
template <int W, class T>
__device__ __forceinline__ void load_b_swizzled(unsigned (&b)[4], const T* tile, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  kernels::ldmatrix_x4(b, swizzled_at<W>(tile, n0 + (lane & 7) + (lane >> 4) * 8, k0 + ((lane >> 3) & 1) * 8));
}
template <int W, class T>
__device__ __forceinline__ void load_b_trans_swizzled(unsigned (&b)[4], const T* tile, int k0, int n0) {
  const int lane = threadIdx.x & 31;
  kernels::ldmatrix_x4_trans(b, swizzled_at<W>(tile, k0 + (lane & 7) + ((lane >> 3) & 1) * 8, n0 + (lane >> 4) * 8));
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
  // The same from j - pos (TileMask's relative position).
  __device__ __forceinline__ float at(float dot, int dj) const {
    float unused;
    return at(dot, dj, unused);
  }
  // The same with d score / d (q . k), for the backward.
  __device__ __forceinline__ float at(float dot, int dj, float& dscore) const {
    float x;
    if (softcap) {
      const float t = tanhf(dot * cap_scale);
      x = cap_log2 * t;
      dscore = scale * (1.f - t * t);
    } else {
      x = dot * scale_log2;
      dscore = scale;
    }
    if (alibi) x -= slope_log2 * float(abs(dj));
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

// The forward's per-row work on one warp's 16 query rows (row0.. row0 + 15 of the sequence), shared by
// the mma.sync and the warpgroup-MMA kernels: both hold a 16 x (8 NT) score tile and a 16 x (8 DT)
// output tile as C fragments, element 4 nt + e of a thread at row row0 + gq + 8 (e >> 1), column
// 8 nt + 2 tq + (e & 1). `sc(i)` / `o(i)` return those elements (float&).

// Visibility in 32 bits, relative to a tile: key j0 + c against the query at diagonal position
// row0 + off + r is j - pos = rel + c - r. Sequences are far shorter than 2^30 keys, so rel and the
// windows clamp there; no window is a bound past any |j - pos| (2^30 + a tile).
struct TileMask {
  int rel, keys, left, right;
  __device__ __forceinline__ TileMask(const Geometry& g, const Seq& s, int64_t row0, int64_t j0, int width) {
    constexpr int64_t kFar = int64_t(1) << 30;
    constexpr int kNone = (1 << 30) + 4096;
    rel = int(max(min(j0 - row0 - s.off, kFar), -kFar));
    keys = int(min(max(s.sk - j0, int64_t(0)), int64_t(width)));
    left = g.window_left >= 0 ? int(min(g.window_left, kFar)) : kNone;
    right = g.window_right >= 0 ? int(min(g.window_right, kFar)) : kNone;
  }
  // Key column c is hidden from query row r (c < width, r within the tile). The backward's transposed
  // tiles ask the same of key row r against query column c: hidden(c, r).
  __device__ __forceinline__ bool hidden(int r, int c) const {
    const int dj = rel + c - r;
    return c >= keys || dj < -left || dj > right;
  }
};

// A plain score's tile that needs a mask: the hidden scores -inf, the others kept (raw dots; the
// caller's online softmax scales them).
template <int NT, class S>
__device__ __forceinline__ void mask_tile(S&& sc, const Geometry& g, const Seq& s, int64_t row0, int64_t j0) {
  const int lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const TileMask mask(g, s, row0, j0, 8 * NT);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (mask.hidden(gq + (e >> 1) * 8, nt * 8 + 2 * tq + (e & 1))) sc(nt * 4 + e) = -INFINITY;
}

// Scores in the log2 domain on a tile that needs the rule applied (masked ones -inf).
template <int NT, class S>
__device__ __forceinline__ void apply_score_rule(S&& sc, const Geometry& g, const Seq& s, const Score& score, bool full,
                                                 int64_t row0, int64_t j0) {
  const int lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const TileMask mask(g, s, row0, j0, 8 * NT);  // the mask and ALiBi's distance in 32 bits
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = gq + (e >> 1) * 8, c = nt * 8 + 2 * tq + (e & 1);
      float& x = sc(nt * 4 + e);
      x = (full || !mask.hidden(r, c)) ? score.at(x, mask.rel + c - r) : -INFINITY;
    }
}

// One warp's score step on the tile of keys [j0, j_last] for the block's queries [i0, i_last]: a plain
// score on a tile needing no mask returns f = scale * log2(e) for online_softmax's FFMA; otherwise the
// rule runs here (masked scores -inf) and f = 1.
template <int NT, class S>
__device__ __forceinline__ float score_tile(S&& sc, const Geometry& g, const Seq& s, const Score& score, bool plain,
                                            int64_t i0, int64_t i_last, int64_t row0, int64_t j0, int64_t j_last) {
  const bool full = tile_inside(g, s, i0, i_last, j0, j_last);
  const bool fast = full && plain;
  const float f = plain ? score.scale_log2 : 1.f;
  if (!fast) {
    // A plain score only masks, in 32 bits: the rule's 64-bit positions cost more than the products.
    if (plain) mask_tile<NT>(sc, g, s, row0, j0);
    else apply_score_rule<NT>(sc, g, s, score, full, row0, j0);
  }
  return f;
}

// The online softmax step of one tile: x = f * s, the running max m and sum l of the two rows, the
// scores replaced by p = exp2(x - m), the output rescaled.
template <int NT, int DT, class S, class O>
__device__ __forceinline__ void online_softmax(S&& sc, O&& o, float (&m)[2], float (&l)[2], float f) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(sc(nt * 4 + hf * 2), sc(nt * 4 + hf * 2 + 1)));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mn = fmaxf(m[hf], mx * f);
    const float mu = mn == -INFINITY ? 0.f : mn;
    const float corr = kernels::ex2_ftz(m[hf] - mu);
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = sc(nt * 4 + hf * 2 + e);
        x = kernels::ex2_ftz(fmaf(x, f, -mu));
        sum += x;
      }
    }
    l[hf] = l[hf] * corr + sum;
    m[hf] = mn;
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      o(dt * 4 + hf * 2) *= corr;
      o(dt * 4 + hf * 2 + 1) *= corr;
    }
  }
}

// The epilogue: the row sums over the quad, the sink (its logit in the log2 domain, -inf without),
// 1 / l, out and lse stored. (flash_fwd.cuh writes it out: through this function the mma.sync
// kernel took 196 registers instead of 168 at d 128.)
template <class T, int DT, class O>
__device__ __forceinline__ void store_rows(O&& o, const float (&m)[2], const float (&l)[2], const Geometry& g,
                                           const Pointers& p, const Seq& s, int64_t b, int64_t h, int64_t row0,
                                           float sink_log2) {
  const int lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float lv = l[hf];
    lv += __shfl_xor_sync(0xffffffffu, lv, 1);
    lv += __shfl_xor_sync(0xffffffffu, lv, 2);
    float mv = m[hf], corr = 1.f;
    if (g.sinks) {
      const float mn = fmaxf(mv, sink_log2);
      corr = mv == -INFINITY ? 0.f : exp2f(mv - mn);
      lv = lv * corr + exp2f(sink_log2 - mn);
      mv = mn;
    }
    const float inv = lv > 0.f ? corr / lv : 0.f;
    const int64_t i = row0 + gq + hf * 8;
    if (i < s.sq) {
      T* orow = row_ptr_mut<T>(p.out, b, s.q_begin + i, h);
#pragma unroll
      for (int dt = 0; dt < DT; ++dt)
        *reinterpret_cast<unsigned*>(orow + dt * 8 + 2 * tq) =
            kernels::pack2<T>(o(dt * 4 + hf * 2) * inv, o(dt * 4 + hf * 2 + 1) * inv);
      if (p.lse != nullptr && tq == 0)
        static_cast<float*>(p.lse)[lse_index(g, s, b, h, i)] = lv > 0.f ? (mv + log2f(lv)) * kLn2 : -INFINITY;
    }
  }
}

}  // namespace baracuda::attention::flash
