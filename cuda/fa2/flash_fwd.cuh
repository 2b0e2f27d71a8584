// The flash-attention forward kernel for sm_80+ (the FlashAttention-2 design, our code): one block
// of four warps takes BM query rows of one (sequence, head), every warp 16 * MT of them; it streams
// the visible key / value tiles of BN rows through shared memory (cp.async, K of the next tile in
// flight while this tile's P V runs), computes S = Q K^T and O += P V with mma.sync m16n8k16 in
// f32, and keeps the softmax online in registers (log2 domain, one exp2 per score). bf16 / f16,
// head dim D (= dv) a multiple of 16.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.h"
#include "common/fast_exp.cuh"
#include "fa2/flash_common.cuh"

namespace baracuda::attention::flash {


// Q, K and V tiles of 16-bit elements, rows padded to d + 8.
constexpr int forward_smem_bytes(int d, int bm, int bn) { return (bm + 2 * bn) * (d + 8) * 2; }
template <class T, int D_, int BN_, int MT_> struct FwdConfig {
  static_assert(sizeof(T) == 2, "16-bit operands");
  static constexpr int D = D_, BN = BN_, MT = MT_;
  static constexpr int BM = 16 * MT * kWarps;
  static constexpr int LD = D + 8;
  static constexpr int smem_bytes = forward_smem_bytes(D, BM, BN);
};

// kPlain: a plain score (no softcap / ALiBi, scale > 0; Score::plain), compiled apart so the rule's
// registers leave the loop: the masked tiles only mask, and m128n64 at D 128 fits without spills.
template <class T, class Cfg, bool kPlain>
__global__ void __launch_bounds__(kWarps * 32) flash_fwd_kernel(Geometry g, Pointers p) {
  constexpr int D = Cfg::D, BN = Cfg::BN, MT = Cfg::MT, BM = Cfg::BM, LD = Cfg::LD;
  constexpr int NT = BN / 8, DT = D / 8;  // n-tiles of S, of O
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* Qs = reinterpret_cast<T*>(smem_raw);
  T* Ks = Qs + BM * LD;
  T* Vs = Ks + BN * LD;

  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, gq = lane >> 2, tq = lane & 3;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const Seq s = sequence(g, p, b);
  int64_t i0, i_last, nb_lo, nb_hi;
  if (!query_tile<BM, BN>(g, s, i0, i_last, nb_lo, nb_hi)) return;
  const int64_t hk = h / (g.hq / g.hkv);

  const T* qb = row_ptr<T>(p.q, b, s.q_begin, h);
  const T* kb = row_ptr<T>(p.k, b, s.k_begin, hk);
  const T* vb = row_ptr<T>(p.v, b, s.k_begin, hk);

  const Score score(g, p, b, h);

  float o[MT][DT][4];
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }

  if (nb_lo < nb_hi) {
    load_tile<BM, D, LD>(Qs, qb, p.q.row, i0, s.sq);
    load_tile<BN, D, LD>(Ks, kb, p.k.row, nb_lo * BN, s.sk);
    kernels::cp_async_commit();
  }
  for (int64_t nb = nb_lo; nb < nb_hi; ++nb) {
    const int64_t j0 = nb * BN;
    load_tile<BN, D, LD>(Vs, vb, p.v.row, j0, s.sk);
    kernels::cp_async_commit();
    kernels::cp_async_wait<1>();
    __syncthreads();  // Q and this K tile are in

    float sc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) sc[mt][nt][0] = sc[mt][nt][1] = sc[mt][nt][2] = sc[mt][nt][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      unsigned a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) load_a<LD>(a[mt], Qs, (mt * kWarps + w) * 16, kk * 16);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        unsigned bf[4];
        load_b<LD>(bf, Ks, np * 16, kk * 16);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          kernels::mma16816<T>(sc[mt][2 * np], a[mt], bf[0], bf[1]);
          kernels::mma16816<T>(sc[mt][2 * np + 1], a[mt], bf[2], bf[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this K tile
    if (nb + 1 < nb_hi) load_tile<BN, D, LD>(Ks, kb, p.k.row, j0 + BN, s.sk);
    kernels::cp_async_commit();

    // Scores in the log2 domain, x = f * s: the plain-score kernel keeps s and folds f = scale *
    // log2(e) into the exp's FFMA, masking (-inf) only a tile not inside every row's window and the
    // sequence; the general kernel computes x by the rule (masked ones -inf) and f = 1.
    const bool full = tile_inside(g, s, i0, i_last, j0, j0 + BN - 1);
    const float f = kPlain ? score.scale_log2 : 1.f;
    if (!(kPlain && full))
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        auto x = [&](int i) -> float& { return sc[mt][i >> 2][i & 3]; };
        if constexpr (kPlain) mask_tile<NT>(x, g, s, i0 + (mt * kWarps + w) * 16, j0);
        else apply_score_rule<NT>(x, g, s, score, full, i0 + (mt * kWarps + w) * 16, j0);
      }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      online_softmax<NT, DT>([&](int i) -> float& { return sc[mt][i >> 2][i & 3]; },
                             [&](int i) -> float& { return o[mt][i >> 2][i & 3]; }, m[mt], l[mt], f);

    kernels::cp_async_wait<1>();
    __syncthreads();  // this V tile is in
#pragma unroll
    for (int kc = 0; kc < BN / 16; ++kc) {
      unsigned a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) c_to_a<T>(a[mt], sc[mt], kc);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        unsigned bf[4];
        load_b_trans<LD>(bf, Vs, kc * 16, dp * 16);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          kernels::mma16816<T>(o[mt][2 * dp], a[mt], bf[0], bf[1]);
          kernels::mma16816<T>(o[mt][2 * dp + 1], a[mt], bf[2], bf[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this V tile
  }
  kernels::cp_async_wait<0>();

  // The row sums over the quad, the sink, 1 / l, and the stores: flash_common.cuh's store_rows,
  // written out (see there).
  const float sink_log2 = g.sinks ? static_cast<const float*>(p.sinks)[h] * kLog2e : -INFINITY;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float lv = l[mt][hf];
      lv += __shfl_xor_sync(0xffffffffu, lv, 1);
      lv += __shfl_xor_sync(0xffffffffu, lv, 2);
      float mv = m[mt][hf], corr = 1.f;
      if (g.sinks) {
        const float mn = fmaxf(mv, sink_log2);
        corr = mv == -INFINITY ? 0.f : exp2f(mv - mn);
        lv = lv * corr + exp2f(sink_log2 - mn);
        mv = mn;
      }
      const float inv = lv > 0.f ? corr / lv : 0.f;
      const int64_t i = i0 + (mt * kWarps + w) * 16 + gq + hf * 8;
      if (i < s.sq) {
        T* orow = row_ptr_mut<T>(p.out, b, s.q_begin + i, h);
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
          *reinterpret_cast<unsigned*>(orow + dt * 8 + 2 * tq) =
              kernels::pack2<T>(o[mt][dt][hf * 2] * inv, o[mt][dt][hf * 2 + 1] * inv);
        if (p.lse != nullptr && tq == 0)
          static_cast<float*>(p.lse)[lse_index(g, s, b, h, i)] =
              lv > 0.f ? (mv + log2f(lv)) * kLn2 : -INFINITY;
      }
    }
  }
}

template <class T, class Cfg, bool kPlain> void launch_forward(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  constexpr auto kernel = flash_fwd_kernel<T, Cfg, kPlain>;
  opt_in_dynamic_smem(kernel, Cfg::smem_bytes, "cudaFuncSetAttribute(flash attention forward)");
  const dim3 grid(unsigned((g.sq + Cfg::BM - 1) / Cfg::BM), unsigned(g.hq), unsigned(g.batch));
  kernel<<<grid, kWarps * 32, Cfg::smem_bytes, stream>>>(g, p);
  cuda_check(cudaGetLastError(), "attention flash forward launch");
}
template <class T, class Cfg> void launch_forward(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  if (g.plain_score()) launch_forward<T, Cfg, true>(g, p, stream);
  else launch_forward<T, Cfg, false>(g, p, stream);
}

// Defined per dtype (flash_fwd_bf16.cu, flash_fwd_f16.cu).
template <class T> void forward(const Geometry& g, const Pointers& p, cudaStream_t stream);

}  // namespace baracuda::attention::flash
