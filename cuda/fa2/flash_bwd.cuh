// The flash-attention backward for sm_80+ (our code): two tensor-core kernels that recompute the
// probabilities from the saved lse, with no atomics, so every gradient is summed in a fixed order
// (bitwise reproducible):
//   grad_q:         one block per 64 query rows of one head; over the visible key tiles
//                   S = Q K^T, dP = dO V^T, dS = P (dP - delta) dscore, dQ += dS K.
//   grad_k, grad_v: one block per 64 key rows of one kv head; over every query head of the group
//                   and the query tiles that see the keys, the transposed products
//                   S^T = K Q^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q.
// delta = sum(dO * O) per row comes first (the rowwise delta kernel). bf16 / f16, D = dv in
// {64, 96, 128}; mma.sync m16n8k16 with f32 accumulators; the next K / V (Q / dO) tile is loaded
// while this one is used.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "common/fast_exp.cuh"
#include "fa2/flash_common.cuh"

namespace baracuda::attention::flash {

// lse in the log2 domain: +inf (p = 0 for every key) for a row that saw nothing (-inf) or is not
// there (`in` false).
__device__ __forceinline__ float log2_domain(float lse, bool in = true) {
  return in && lse != -INFINITY ? lse * kLog2e : INFINITY;
}
__device__ __forceinline__ float lse_log2(const Pointers& p, int64_t idx) {
  return log2_domain(static_cast<const float*>(p.lse)[idx]);
}

// What the mma.sync kernels below and the warpgroup-MMA ones (flash_bwd_sm90.cuh) share: both hold
// one warp's 16 rows of a tile as C fragments, element 4 nt + e of a thread at row r0 + gq + 8 (e >> 1),
// column 8 nt + 2 tq + (e & 1); accessors `x(i)` return those elements (float&).

// lse (log2 domain) and delta of this thread's two query rows row0 + gq (+ 8); rows past the
// sequence see no key.
__device__ __forceinline__ void query_row_stats(float (&lse2)[2], float (&delta)[2], const Geometry& g,
                                                const Pointers& p, const Seq& s, int64_t b, int64_t h, int64_t row0) {
  const int gq = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int64_t i = row0 + gq + hf * 8;
    const bool in = i < s.sq;
    const int64_t li = lse_index(g, s, b, h, in ? i : 0);
    lse2[hf] = in ? lse_log2(p, li) : INFINITY;
    delta[hf] = in ? static_cast<const float*>(p.delta)[li] : 0.f;
  }
}

// grad_q's side, in two passes (the warpgroup-MMA kernel runs the first while dP = dO V^T is still in
// flight): S = Q K^T of queries row0.. and keys j0 + (8 NT columns) becomes P dscore in place, then
// dS = P dscore (dP - delta). `full`: the tile needs no mask.
template <int NT, class SC>
__device__ __forceinline__ void scaled_probs(SC&& sc, const Geometry& g, const Seq& s, const Score& score, bool full,
                                             bool plain, const float (&lse2)[2], int64_t row0, int64_t j0) {
  const int lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  if (full && plain) {  // p = exp2(s * scale_log2 - lse2): one FFMA and the exp
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float& x = sc(nt * 4 + e);
        x = kernels::ex2_ftz(fmaf(x, score.scale_log2, -lse2[e >> 1])) * score.scale;
      }
  } else {  // a tile that needs a mask, or a general score: 32-bit tile-relative positions (TileMask)
    const TileMask mask(g, s, row0, j0, 8 * NT);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = gq + (e >> 1) * 8, c = nt * 8 + 2 * tq + (e & 1);
        float& x = sc(nt * 4 + e);
        float dscore = score.scale;
        const float y = plain ? fmaf(x, score.scale_log2, -lse2[e >> 1])
                              : score.at(x, mask.rel + c - r, dscore) - lse2[e >> 1];
        x = (full || !mask.hidden(r, c)) ? kernels::ex2_ftz(y) * dscore : 0.f;
      }
  }
}
template <int NT, class SC, class DP, class OUT>
__device__ __forceinline__ void grad_scores(SC&& sc, DP&& dp, const float (&delta)[2], OUT&& out) {
#pragma unroll
  for (int i = 0; i < NT * 4; ++i) out(i, sc(i) * (dp(i) - delta[(i >> 1) & 1]));
}

// grad_k / grad_v's side, transposed: S^T = K Q^T of keys krow0.. and queries i0 + (8 NQ columns), and
// dP^T = V dO^T. Query column c's stats come from lse2_of(c, in) / delta_of(c, in) (`in`: the query is
// in the sequence).
// Each query column c = 8 nt + 2 tq + ce of this thread, with e0 = 4 nt + ce: its elements e0 + 2 hf
// sit at key rows gq + 8 hf. The column's stats are read once for both.
template <int NQ, class F> __device__ __forceinline__ void each_column(F&& f) {
  const int tq = threadIdx.x & 3;
#pragma unroll
  for (int nt = 0; nt < NQ; ++nt)
#pragma unroll
    for (int ce = 0; ce < 2; ++ce) f(nt * 8 + 2 * tq + ce, nt * 4 + ce);
}
// Each element e of this thread's S^T (query columns in turn, the column's lse read once for its two
// key rows gq, gq + 8) with its probability and d score / d (q . k): f(e, p, dscore).
template <int NQ, class ST, class LSE, class F>
__device__ __forceinline__ void each_prob_transposed(ST&& st, LSE&& lse2_of, const Geometry& g, const Seq& s,
                                                     const Score& score, bool full, int64_t i0, int64_t krow0, F&& f) {
  const int gq = (threadIdx.x & 31) >> 2;
  const bool plain = score.plain();
  if (full && plain) {  // p = exp2(s * scale_log2 - lse2): one FFMA and the exp
    each_column<NQ>([&](int c, int e0) {
      const float l2 = lse2_of(c, i0 + c < s.sq);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf)
        f(e0 + 2 * hf, kernels::ex2_ftz(fmaf(st(e0 + 2 * hf), score.scale_log2, -l2)), score.scale);
    });
    return;
  }
  // A tile that needs a mask, or a general score: 32-bit tile-relative positions (TileMask from the
  // keys' side: this warp's 16 key rows against the query columns).
  const TileMask mask(g, s, i0, krow0, 16);
  each_column<NQ>([&](int c, int e0) {
    const bool in = i0 + c < s.sq;
    const float l2 = lse2_of(c, in);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int e = e0 + 2 * hf, r = gq + 8 * hf;
      float dscore = score.scale;
      const float y = plain ? fmaf(st(e), score.scale_log2, -l2) : score.at(st(e), mask.rel + r - c, dscore) - l2;
      f(e, (full || (in && !mask.hidden(c, r))) ? kernels::ex2_ftz(y) : 0.f, dscore);
    }
  });
}
// In one pass (the mma.sync kernel): S^T becomes P^T and dP^T becomes dS^T.
template <int NQ, class ST, class DPT, class LSE, class DELTA>
__device__ __forceinline__ void grad_scores_transposed(ST&& st, DPT&& dpt, LSE&& lse2_of, DELTA&& delta_of,
                                                       const Geometry& g, const Seq& s, const Score& score, bool full,
                                                       int64_t i0, int64_t krow0) {
  float dl;  // the column's delta, read beside its lse
  auto stats = [&](int c, bool in) {
    const float l2 = lse2_of(c, in);
    dl = delta_of(c, in);
    return l2;
  };
  each_prob_transposed<NQ>(st, stats, g, s, score, full, i0, krow0, [&](int e, float pr, float dscore) {
    st(e) = pr;
    dpt(e) = pr * (dpt(e) - dl) * dscore;
  });
}
// In two (the warpgroup-MMA kernel, the first while dP^T's product is in flight): S^T becomes P^T
// dscore, P^T itself handed to keep(e, p); then dS^T = P^T dscore (dP^T - delta) handed to out(e, ds).
template <int NQ, class ST, class KEEP, class LSE>
__device__ __forceinline__ void probs_transposed(ST&& st, KEEP&& keep, LSE&& lse2_of, const Geometry& g, const Seq& s,
                                                 const Score& score, bool full, int64_t i0, int64_t krow0) {
  each_prob_transposed<NQ>(st, lse2_of, g, s, score, full, i0, krow0, [&](int e, float pr, float dscore) {
    keep(e, pr);
    st(e) = pr * dscore;
  });
}
template <int NQ, class ST, class DPT, class DELTA, class OUT>
__device__ __forceinline__ void grad_scores_from_probs(ST&& st, DPT&& dpt, DELTA&& delta_of, const Seq& s, int64_t i0,
                                                       OUT&& out) {
  each_column<NQ>([&](int c, int e0) {
    const float dl = delta_of(c, i0 + c < s.sq);
    out(e0, st(e0) * (dpt(e0) - dl));
    out(e0 + 2, st(e0 + 2) * (dpt(e0 + 2) - dl));
  });
}

// This warp's rows r0 + gq (+ 8) below `rows` of a gradient (row `first + r` of operand `o`, head h),
// rounded to T.
template <class T, int DT, class X>
__device__ __forceinline__ void store_grad_rows(X&& x, const Operand& o, int64_t b, int64_t first, int64_t h,
                                                int64_t r0, int64_t rows) {
  const int lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int64_t r = r0 + gq + hf * 8;
    if (r >= rows) continue;
    T* row = row_ptr_mut<T>(o, b, first + r, h);
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
      *reinterpret_cast<unsigned*>(row + dt * 8 + 2 * tq) =
          kernels::pack2<T>(x(dt * 4 + hf * 2), x(dt * 4 + hf * 2 + 1));
  }
}

// The two products both kernels start from, over one warp's 16 rows and an N-wide tile of the other
// side: x = A1 B1^T and y = A2 B2^T (A1 / A2 at rows r0.. of row-major tiles, B1 / B2 stored [n][k]),
// in one loop over D so each k-step loads its two A fragments once. grad_q: S = Q K^T, dP = dO V^T;
// grad_k / grad_v: S^T = K Q^T, dP^T = V dO^T.
template <class T, int N, int D, int LD>
__device__ __forceinline__ void two_products(float (&x)[N / 8][4], float (&y)[N / 8][4], const T* a1, const T* a2,
                                             const T* b1, const T* b2, int r0) {
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[nt][e] = y[nt][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    unsigned f1[4], f2[4];
    load_a<LD>(f1, a1, r0, kk * 16);
    load_a<LD>(f2, a2, r0, kk * 16);
#pragma unroll
    for (int np = 0; np < N / 16; ++np) {
      unsigned g1[4], g2[4];
      load_b<LD>(g1, b1, np * 16, kk * 16);
      load_b<LD>(g2, b2, np * 16, kk * 16);
      kernels::mma16816<T>(x[2 * np], f1, g1[0], g1[1]);
      kernels::mma16816<T>(x[2 * np + 1], f1, g1[2], g1[3]);
      kernels::mma16816<T>(y[2 * np], f2, g2[0], g2[1]);
      kernels::mma16816<T>(y[2 * np + 1], f2, g2[2], g2[3]);
    }
  }
}

// The backward kernels' two-stage cp.async pipeline over steps [0, n): first() issues the copies the
// block reads throughout and step 0's, load(t, stage) step t's; once step t's have landed (each thread
// then runs landed(t, stage), e.g. a proxy fence for wgmma, before the block barrier) body(t, stage) runs with
// step t + 1's in flight, and a second barrier frees the stage for the copies two steps on.
template <class First, class Load, class Landed, class Body>
__device__ __forceinline__ void pipelined_steps(int64_t n, First&& first, Load&& load, Landed&& landed, Body&& body) {
  if (n > 0) {
    first();
    kernels::cp_async_commit();
  }
  for (int64_t t = 0; t < n; ++t) {
    const int stage = int(t & 1);
    if (t + 1 < n) load(t + 1, stage ^ 1);
    kernels::cp_async_commit();
    kernels::cp_async_wait<1>();
    landed(t, stage);
    __syncthreads();
    body(t, stage);
    __syncthreads();
  }
  kernels::cp_async_wait<0>();
}

template <class T, int D_, int BN_> struct DqConfig {
  static constexpr int D = D_, BN = BN_, BM = 16 * kWarps, LD = D + 8, kThreads = kWarps * 32;
  static constexpr int smem_bytes = (2 * BM + 4 * BN) * LD * int(sizeof(T));
};

template <class T, class Cfg>
__global__ void __launch_bounds__(kWarps * 32) flash_bwd_dq_kernel(Geometry g, Pointers p) {
  constexpr int D = Cfg::D, BN = Cfg::BN, BM = Cfg::BM, LD = Cfg::LD, NT = BN / 8, DT = D / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* Qs = reinterpret_cast<T*>(smem_raw);
  T* dOs = Qs + BM * LD;
  T* Ks = dOs + BM * LD;   // two stages
  T* Vs = Ks + 2 * BN * LD;

  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, gq = lane >> 2, tq = lane & 3;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const Seq s = sequence(g, p, b);
  int64_t i0, i_last, nb_lo, nb_hi;
  if (!query_tile<BM, BN>(g, s, i0, i_last, nb_lo, nb_hi)) return;
  const int64_t hk = h / (g.hq / g.hkv);
  const Score score(g, p, b, h);
  const bool plain = score.plain();

  float lse2[2], delta[2];
  query_row_stats(lse2, delta, g, p, s, b, h, i0 + w * 16);
  float dq[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) dq[dt][0] = dq[dt][1] = dq[dt][2] = dq[dt][3] = 0.f;

  const T* kb = row_ptr<T>(p.k, b, s.k_begin, hk);
  const T* vb = row_ptr<T>(p.v, b, s.k_begin, hk);
  auto load_kv = [&](int64_t t, int stage) {
    load_tile<BN, D, LD>(Ks + stage * BN * LD, kb, p.k.row, (nb_lo + t) * BN, s.sk);
    load_tile<BN, D, LD>(Vs + stage * BN * LD, vb, p.v.row, (nb_lo + t) * BN, s.sk);
  };
  auto first = [&] {
    load_tile<BM, D, LD>(Qs, row_ptr<T>(p.q, b, s.q_begin, h), p.q.row, i0, s.sq);
    load_tile<BM, D, LD>(dOs, row_ptr<T>(p.grad_out, b, s.q_begin, h), p.grad_out.row, i0, s.sq);
    load_kv(0, 0);
  };
  pipelined_steps(nb_hi - nb_lo, first, load_kv, [](int64_t, int) {}, [&](int64_t t, int stage) {
    const T* K = Ks + stage * BN * LD;
    const T* V = Vs + stage * BN * LD;

    float sc[NT][4], dp[NT][4];
    two_products<T, BN, D, LD>(sc, dp, Qs, dOs, K, V, w * 16);
    const int64_t j0 = (nb_lo + t) * BN;
    const bool full = tile_inside(g, s, i0, i_last, j0, j0 + BN - 1);
    auto scs = [&](int i) -> float& { return sc[i >> 2][i & 3]; };
    scaled_probs<NT>(scs, g, s, score, full, plain, lse2, i0 + w * 16, j0);
    grad_scores<NT>(scs, [&](int i) -> float& { return dp[i >> 2][i & 3]; }, delta,
                    [&](int i, float ds) { sc[i >> 2][i & 3] = ds; });
#pragma unroll
    for (int kc = 0; kc < BN / 16; ++kc) {
      unsigned a[4];
      c_to_a<T>(a, sc, kc);
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        unsigned bf[4];
        load_b_trans<LD>(bf, K, kc * 16, dd * 16);
        kernels::mma16816<T>(dq[2 * dd], a, bf[0], bf[1]);
        kernels::mma16816<T>(dq[2 * dd + 1], a, bf[2], bf[3]);
      }
    }
  });
  store_grad_rows<T, DT>([&](int i) -> float& { return dq[i >> 2][i & 3]; }, p.grad_q, b, s.q_begin, h, i0 + w * 16,
                         s.sq);
}

// A grad_k / grad_v step's query-tile stats, staged beside its Q tile in two stages of BMQ floats
// each: lse by the block's first BMQ threads, delta by the next BMQ (cp.async, zero past the
// sequence); read back per query column. Read from global memory per column instead, the sm_90a
// kernel ran 20% slower at d64 (docs/benchmark-notes.md).
template <int BMQ> struct StagedQueryStats {
  float* lse;    // [2][BMQ]
  float* delta;  // [2][BMQ]
  __device__ __forceinline__ void load(int stage, const Geometry& g, const Pointers& p, const Seq& s, int64_t b,
                                       int64_t h, int64_t i0) const {
    const int c = int(threadIdx.x) % BMQ;
    const bool in = i0 + c < s.sq;
    const int64_t li = lse_index(g, s, b, h, in ? i0 + c : 0);
    if (threadIdx.x < BMQ) kernels::cp_async4_zfill(lse + stage * BMQ + c, static_cast<const float*>(p.lse) + li, in);
    else if (threadIdx.x < 2 * BMQ)
      kernels::cp_async4_zfill(delta + stage * BMQ + c, static_cast<const float*>(p.delta) + li, in);
  }
  // One stage's stats: query column c's lse in the log2 domain (+inf: p = 0 for a column past the
  // sequence or a row that saw nothing) and delta.
  struct Stage {
    const float* lse;
    const float* delta;
    __device__ __forceinline__ float lse2(int c, bool in) const { return log2_domain(lse[c], in); }
    __device__ __forceinline__ float delta_of(int c, bool in) const { return in ? delta[c] : 0.f; }
  };
  __device__ __forceinline__ Stage at(int stage) const { return {lse + stage * BMQ, delta + stage * BMQ}; }
};

// grad_k / grad_v's walk for the key rows [j0, j0 + bn): the query tiles of BMQ rows that see them, for
// each head of the kv head's group in turn; step `it` (of `total`) is query head head(it), rows from
// row0(it).
template <int BMQ> struct QueryTiles {
  int64_t t_lo = 0, ntiles = 0, total = 0, head0 = 0;
  __device__ __forceinline__ QueryTiles(const Geometry& g, const Seq& s, int64_t j0, int64_t bn, int64_t hk,
                                        int64_t group) {
    int64_t ilo = 0, ihi = 0, unused;
    if (j0 < s.sk) {
      visible_queries(g, s, j0, ilo, unused);
      visible_queries(g, s, min(j0 + bn, s.sk) - 1, unused, ihi);
    }
    t_lo = ilo / BMQ;
    ntiles = ihi > ilo ? (ihi + BMQ - 1) / BMQ - t_lo : 0;
    total = group * ntiles;
    head0 = hk * group;
  }
  __device__ __forceinline__ int64_t head(int64_t it) const { return head0 + it / ntiles; }
  __device__ __forceinline__ int64_t row0(int64_t it) const { return (t_lo + it % ntiles) * BMQ; }
};

template <class T, int D_, int BMQ_> struct DkvConfig {
  static constexpr int D = D_, BMQ = BMQ_, BN = 16 * kWarps, LD = D + 8, kThreads = kWarps * 32;
  // K, V, two stages of Q and of dO, two of the query stats.
  static constexpr int smem_bytes = (2 * BN + 4 * BMQ) * LD * int(sizeof(T)) + 4 * BMQ * 4;
  static_assert(kThreads >= 2 * BMQ, "one thread per staged lse / delta");
};

template <class T, class Cfg>
__global__ void __launch_bounds__(kWarps * 32) flash_bwd_dkv_kernel(Geometry g, Pointers p) {
  constexpr int D = Cfg::D, BMQ = Cfg::BMQ, BN = Cfg::BN, LD = Cfg::LD, NQ = BMQ / 8, DT = D / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* Ks = reinterpret_cast<T*>(smem_raw);
  T* Vs = Ks + BN * LD;
  T* Qs = Vs + BN * LD;     // two stages
  T* dOs = Qs + 2 * BMQ * LD;
  float* stats = reinterpret_cast<float*>(dOs + 2 * BMQ * LD);
  const StagedQueryStats<BMQ> staged{stats, stats + 2 * BMQ};

  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, gq = lane >> 2, tq = lane & 3;
  const int64_t b = blockIdx.z, hk = blockIdx.y;
  const Seq s = sequence(g, p, b);
  const int64_t rows_k = s.rows_k;
  const int64_t j0 = int64_t(blockIdx.x) * BN;
  if (j0 >= rows_k) return;
  const int64_t group = g.hq / g.hkv;

  float dk[DT][4], dv[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.f;

  const QueryTiles<BMQ> walk(g, s, j0, BN, hk, group);
  auto load_q = [&](int64_t it, int stage) {
    const int64_t h = walk.head(it), i0 = walk.row0(it);
    load_tile<BMQ, D, LD>(Qs + stage * BMQ * LD, row_ptr<T>(p.q, b, s.q_begin, h), p.q.row, i0, s.sq);
    load_tile<BMQ, D, LD>(dOs + stage * BMQ * LD, row_ptr<T>(p.grad_out, b, s.q_begin, h), p.grad_out.row, i0, s.sq);
    staged.load(stage, g, p, s, b, h, i0);
  };
  auto first = [&] {
    load_tile<BN, D, LD>(Ks, row_ptr<T>(p.k, b, s.k_begin, hk), p.k.row, j0, s.sk);
    load_tile<BN, D, LD>(Vs, row_ptr<T>(p.v, b, s.k_begin, hk), p.v.row, j0, s.sk);
    load_q(0, 0);
  };
  pipelined_steps(walk.total, first, load_q, [](int64_t, int) {}, [&](int64_t it, int stage) {
    const T* Q = Qs + stage * BMQ * LD;
    const T* dO = dOs + stage * BMQ * LD;
    const int64_t h = walk.head(it), i0 = walk.row0(it);
    const Score score(g, p, b, h);
    const auto stats_now = staged.at(stage);

    float st[NQ][4], dpt[NQ][4];
    two_products<T, BMQ, D, LD>(st, dpt, Ks, Vs, Q, dO, w * 16);
    const bool full = i0 + BMQ <= s.sq && tile_inside(g, s, i0, i0 + BMQ - 1, j0, j0 + BN - 1);
    grad_scores_transposed<NQ>(
        [&](int i) -> float& { return st[i >> 2][i & 3]; }, [&](int i) -> float& { return dpt[i >> 2][i & 3]; },
        [&](int c, bool in) { return stats_now.lse2(c, in); },
        [&](int c, bool in) { return stats_now.delta_of(c, in); },
        g, s, score, full, i0, j0 + w * 16);
#pragma unroll
    for (int kc = 0; kc < BMQ / 16; ++kc) {
      unsigned ap[4], as[4];
      c_to_a<T>(ap, st, kc);
      c_to_a<T>(as, dpt, kc);
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        unsigned bo[4], bq[4];
        load_b_trans<LD>(bo, dO, kc * 16, dd * 16);
        load_b_trans<LD>(bq, Q, kc * 16, dd * 16);
        kernels::mma16816<T>(dv[2 * dd], ap, bo[0], bo[1]);
        kernels::mma16816<T>(dv[2 * dd + 1], ap, bo[2], bo[3]);
        kernels::mma16816<T>(dk[2 * dd], as, bq[0], bq[1]);
        kernels::mma16816<T>(dk[2 * dd + 1], as, bq[2], bq[3]);
      }
    }
  });
  store_grad_rows<T, DT>([&](int i) -> float& { return dk[i >> 2][i & 3]; }, p.grad_k, b, s.k_begin, hk, j0 + w * 16,
                         rows_k);
  store_grad_rows<T, DT>([&](int i) -> float& { return dv[i >> 2][i & 3]; }, p.grad_v, b, s.k_begin, hk, j0 + w * 16,
                         rows_k);
}

// grad_q's blocks (Dq::BM query rows of one head), then grad_k / grad_v's (Dkv::BN key rows of one kv
// head, `extra` its further arguments); the mma.sync kernels here or the warpgroup-MMA ones
// (flash_bwd_sm90.cuh).
template <auto dq, auto dkv, class Dq, class Dkv, class... DkvExtra>
void launch_backward_kernels(const Geometry& g, const Pointers& p, cudaStream_t st, const DkvExtra&... extra) {
  opt_in_dynamic_smem(dq, Dq::smem_bytes, "cudaFuncSetAttribute(flash attention grad_q)");
  opt_in_dynamic_smem(dkv, Dkv::smem_bytes, "cudaFuncSetAttribute(flash attention grad_k / grad_v)");
  if (g.sq > 0)
    dq<<<dim3(unsigned((g.sq + Dq::BM - 1) / Dq::BM), unsigned(g.hq), unsigned(g.batch)), Dq::kThreads, Dq::smem_bytes,
         st>>>(g, p);
  if (g.sk > 0)
    dkv<<<dim3(unsigned((g.sk + Dkv::BN - 1) / Dkv::BN), unsigned(g.hkv), unsigned(g.batch)), Dkv::kThreads,
          Dkv::smem_bytes, st>>>(g, p, extra...);
  cuda_check(cudaGetLastError(), "attention flash backward launch");
}
template <class T, class Dq, class Dkv> void launch_backward(const Geometry& g, const Pointers& p, cudaStream_t st) {
  launch_backward_kernels<flash_bwd_dq_kernel<T, Dq>, flash_bwd_dkv_kernel<T, Dkv>, Dq, Dkv>(g, p, st);
}

// The tiles of each head dim: key tiles of 64 for grad_q; query tiles of 64 (D 64) or 32 (wider:
// grad_k and grad_v both stay in registers) for grad_k / grad_v.
template <class T> void backward(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  if constexpr (head_dim_built(64))
    if (g.d == 64) return launch_backward<T, DqConfig<T, 64, 64>, DkvConfig<T, 64, 64>>(g, p, stream);
  if constexpr (head_dim_built(96))
    if (g.d == 96) return launch_backward<T, DqConfig<T, 96, 64>, DkvConfig<T, 96, 32>>(g, p, stream);
  if constexpr (head_dim_built(128))
    if (g.d == 128) return launch_backward<T, DqConfig<T, 128, 64>, DkvConfig<T, 128, 32>>(g, p, stream);
  throw Unsupported("attention: no flash backward for head dim " + std::to_string(g.d));
}

}  // namespace baracuda::attention::flash
