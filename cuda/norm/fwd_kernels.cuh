// RMSNorm / LayerNorm forward kernels: the row in registers (fwd_reg) and the looped one for any H
// (fwd_loop). See kernels.cuh.
#pragma once
#include "norm/kernel_common.cuh"

namespace baracuda::norm::kern {
using namespace baracuda::kernels;

// ---- forward, row in registers ------------------------------------------------------------------
// A thread group (TPR threads) holds R rows at once as packed 16-byte vectors of T (x, or
// round_T(x + residual)): all loads of the R rows are issued before the first reduction, and the
// R rows' sums share one barrier.
// Row data as packed 16-byte vectors (common/packed_vec.cuh: unpack / pack_into).
template <class T> using VecOf = uint4;
// An optimization barrier on a vector's words: values derived from it before this point cannot
// be reused after it, so the compiler recomputes them instead of keeping them alive.
__device__ __forceinline__ void launder(uint4& u) { asm volatile("" : "+r"(u.x), "+r"(u.y), "+r"(u.z), "+r"(u.w)); }
template <class P> __device__ __forceinline__ P ld_pack(const void* p) { return *static_cast<const P*>(p); }
template <class T> __device__ __forceinline__ uint4 zero_vec() { return make_uint4(0u, 0u, 0u, 0u); }

// Blocks per SM the forward register kernel is compiled for: a register budget plus the packed
// row data (4 registers per vector), so that several rows per SM stay in flight. 256 / 512-thread
// blocks get 48 + 4 x packs: 4 packs then fit 64 registers, 2 x 512 / 4 x 256 threads per SM (at
// 72 registers a 512-thread block ran alone on its SM: H200, H = 8192 at 60% of copy); smaller
// blocks keep 56 (their occupancy steps are fine-grained, and 48 made them spill).
constexpr int fwd_min_blocks(int tpr, int packs) {
  const int regs = (tpr >= 256 ? 48 : 56) + 4 * packs;
  const int b = 65536 / (regs * block_threads(tpr));
  return b < 1 ? 1 : (b > 16 ? 16 : b);
}

// PF (prefetch; one row per block, no residual): the grid is persistent and the block's next
// row is copied (cp.async, 16 bytes per vector, each thread its own vectors) into dynamic shared
// memory while this row is reduced and written, so an SM's loads never wait on its reductions and
// stores. Why: a 1024 x 8 block holds a whole 65536-element row, one block per SM, and without
// the prefetch the SM alternates load -> reduce -> write with nothing to overlap them.
// PM (parameters through shared memory; one row per block, operand-specialized), for the 1024 x 8
// block of H = 65536, which re-reads 128 KB of weight and 128 KB of bias per row from L2 and
// whose output loop waited on them vector by vector (LayerNorm trailed RMSNorm by 13 points of
// copy on the H200 there):
//   1: the last parameter (LayerNorm's bias, RMSNorm's weight) copied once per block into dynamic
//      shared memory, each thread its own columns, on a persistent grid;
//   2: a per-thread ring of kParamRing slots: weight and bias of output vector i are copied
//      (cp.async, one commit group per vector) kParamRing vectors ahead, the first ones issued
//      before the row's reduction, so the output loop reads them from shared memory.
template <class T, int TPR, int I, int R, bool PF, int S, int PM = 0>
__global__ void __launch_bounds__(block_threads(TPR), fwd_min_blocks(TPR, I * R)) fwd_reg(const NormLaunch L) {
  const OperandFlags F = operand_flags<S>(L);
  using C = compute_t<T>;
  constexpr int V = 16 / sizeof(T);
  using P = VecOf<T>;
  constexpr int RPB = TPR > 32 ? 1 : 128 / TPR;
  static_assert(!PF || (R == 1 && RPB == 1), "norm forward: the prefetching kernel holds one row per block");
  static_assert(PM == 0 || (!PF && R == 1 && RPB == 1 && S != kSpecGeneric),
                "norm forward: the shared-parameter kernels hold one row per block, specialized operands");
  constexpr bool PS = PM == 1;
  constexpr int D = kParamRing;
  __shared__ C red[2][3 * R * 32];  // per row parity: [sums, squares][R x 32], then the exact pass's
  extern __shared__ __align__(16) unsigned char norm_fwd_dyn[];
  P* next_row = reinterpret_cast<P*>(norm_fwd_dyn);  // PF: [I][TPR] vectors of the block's next row
  const int lane = threadIdx.x % TPR, group = threadIdx.x / TPR;
  const int64_t H = L.H;
  const C invH = C(1) / C(H), eps = C(L.eps);
  const T* x = static_cast<const T*>(L.x);
  // PF: issues the copies of row r (this thread's vectors) and one commit group.
  // (One base address and constant offsets: a 1024 x 8 block has no registers to spare.)
  auto prefetch = [&](int64_t r) {
    if (r < L.rows) {
      const T* src = x + r * L.x_rs + int64_t(lane) * V;
      const int64_t left = H - int64_t(lane) * V;  // elements from this lane's first column on
#pragma unroll
      for (int i = 0; i < I; ++i)
        cp_async16_if(&next_row[i * TPR + lane], src + i * TPR * V, int64_t(i) * TPR * V < left);
    }
    __pipeline_commit();
  };
  if constexpr (PF) prefetch(blockIdx.x);
  const P* par_sm = reinterpret_cast<const P*>(norm_fwd_dyn);  // PS: [I][TPR] vectors of the parameter
  // PM == 2: output vector i's weight / bias into ring slot i % D ([D][2][TPR] vectors), one commit
  // group (empty past the row's end, so every vector of the loop commits exactly one).
  auto ring_issue = [&](int i) {
    if constexpr (PM == 2) {
      if (i < I) {
        const int64_t col = int64_t(i * TPR + lane) * V;
        P* slot = reinterpret_cast<P*>(norm_fwd_dyn) + (i % D) * 2 * TPR + lane;
        if (F.w) cp_async16_if(slot, static_cast<const T*>(L.w) + col, col < H);
        if (F.b) cp_async16_if(slot + TPR, static_cast<const T*>(L.b) + col, col < H);
      }
      __pipeline_commit();
    }
  };
  if constexpr (PS) {
    const T* src = static_cast<const T*>(F.b ? L.b : L.w) + int64_t(lane) * V;
    const int64_t left = H - int64_t(lane) * V;
#pragma unroll
    for (int i = 0; i < I; ++i)
      cp_async16_if(reinterpret_cast<P*>(norm_fwd_dyn) + i * TPR + lane, src + i * TPR * V, int64_t(i) * TPR * V < left);
    __pipeline_commit();
  }
  int parity = 0;
  for (int64_t base = int64_t(blockIdx.x) * (RPB * R); base < L.rows;
       base += int64_t(gridDim.x) * (RPB * R), parity ^= 1) {
    int64_t row[R];
    bool valid[R];
#pragma unroll
    for (int j = 0; j < R; ++j) { row[j] = base + j * RPB + group; valid[j] = row[j] < L.rows; }
    P h[R][I];
    if constexpr (PF) __pipeline_wait_prior(0);
#pragma unroll
    for (int j = 0; j < R; ++j)
#pragma unroll
      for (int i = 0; i < I; ++i) {
        const int64_t col = int64_t(i * TPR + lane) * V;
        if constexpr (PF) h[j][i] = (valid[j] && col < H) ? next_row[i * TPR + lane] : zero_vec<T>();
        else h[j][i] = (valid[j] && col < H) ? ld_pack<P>(x + row[j] * L.x_rs + col) : zero_vec<T>();
      }
    if (F.res) {
      const T* r = static_cast<const T*>(L.res);
      T* ro = static_cast<T*>(L.res_out);
      // Four vectors at a time: all four loads before the first store (residual_out may alias
      // residual, so a store would otherwise order the loads after it).
      constexpr int N = R * I, Q = N < 4 ? N : 4;
#pragma unroll
      for (int q0 = 0; q0 < N; q0 += Q) {
        P rv[Q];
#pragma unroll
        for (int q = 0; q < Q; ++q) {
          const int j = (q0 + q) / I, i = (q0 + q) % I;
          const int64_t col = int64_t(i * TPR + lane) * V;
          rv[q] = (q0 + q < N && valid[j] && col < H) ? ld_pack<P>(r + row[j] * L.res_rs + col) : zero_vec<T>();
        }
#pragma unroll
        for (int q = 0; q < Q; ++q) {
          if (q0 + q >= N) continue;
          const int j = (q0 + q) / I, i = (q0 + q) % I;
          const int64_t col = int64_t(i * TPR + lane) * V;
#pragma unroll
          for (int k = 0; k < V; ++k)
            pack_into<T>(h[j][i], k, unpack<T>(h[j][i], k) + unpack<T>(rv[q], k));
          if (valid[j] && col < H) *reinterpret_cast<P*>(ro + row[j] * L.res_out_rs + col) = h[j][i];
        }
      }
    }
    // PM == 2: the first D output vectors' parameters, in flight during the reduction. (This
    // thread's reads of those slots for the previous row are behind: their values were stored.)
#pragma unroll
    for (int i = 0; i < D; ++i) ring_issue(i);
    // LayerNorm of 16-bit x (ONE_PASS): the sum and the sum of squares in one reduction, var =
    // E[x^2] - mean^2, when that is well conditioned (E[x^2] <= 16 var, so the cancellation costs
    // at most 4 bits of f32, far below a 16-bit output's rounding); otherwise (a row with
    // |mean| > ~3.9 std, NaN / inf) the exact second pass over (x - mean)^2. The test is on sums
    // every thread of the group holds bit-identically, so the branch is uniform. Saves a pass
    // over the row and a block barrier per row in the common case.
    constexpr bool ONE_PASS = sizeof(T) == 2;
    C s[2 * R];
#pragma unroll
    for (int j = 0; j < R; ++j) {
      s[j] = 0;
      s[R + j] = 0;
#pragma unroll
      for (int i = 0; i < I; ++i)
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const C c = unpack<T>(h[j][i], k);
          if (F.layer) {
            s[j] += c;
            if (ONE_PASS) s[R + j] = fma(c, c, s[R + j]);
          } else {
            s[j] += c * c;
          }
        }
    }
    if (ONE_PASS && F.layer) {
      group_sum_r<TPR, 2 * R, (I * R <= 4)>(s, red[parity]);  // (BFLY: see group_sum_r; 1024 x 8 spills with it)
    } else {
      C s1[R];
#pragma unroll
      for (int j = 0; j < R; ++j) s1[j] = s[j];
      group_sum_r<TPR, R>(s1, red[parity]);
#pragma unroll
      for (int j = 0; j < R; ++j) s[j] = s1[j];
    }
    // Every vector read from next_row went into s, and the block's barrier is behind: the buffer is
    // free for the next row.
    if constexpr (PF) prefetch(base + gridDim.x);
#pragma unroll
    for (int j = 0; j < R; ++j)
#pragma unroll
      for (int i = 0; i < I; ++i) launder(h[j][i]);
    C mean[R], rstd[R];
    bool exact = !ONE_PASS;
    if (F.layer) {
      C var[R];
#pragma unroll
      for (int j = 0; j < R; ++j) {
        mean[j] = s[j] * invH;
        if (ONE_PASS) {
          const C m2 = s[R + j] * invH;
          var[j] = fma(-mean[j], mean[j], m2);
          if (!(m2 <= C(16) * var[j])) exact = true;
        }
      }
      if (exact) {
        C d[R];
#pragma unroll
        for (int j = 0; j < R; ++j) {
          d[j] = 0;
#pragma unroll
          for (int i = 0; i < I; ++i)
            if (int64_t(i * TPR + lane) * V < H) {
#pragma unroll
              for (int k = 0; k < V; ++k) {
                const C c = unpack<T>(h[j][i], k) - mean[j];
                d[j] += c * c;
              }
            }
        }
        group_sum_r<TPR, R>(d, red[parity] + 2 * R * 32);
#pragma unroll
        for (int j = 0; j < R; ++j) {
          var[j] = d[j] * invH;
          // (h - mean) of the pass above would otherwise stay alive in compute precision.
#pragma unroll
          for (int i = 0; i < I; ++i) launder(h[j][i]);
        }
      }
#pragma unroll
      for (int j = 0; j < R; ++j) rstd[j] = inv_sqrt<T>(var[j] + eps);
    } else {
#pragma unroll
      for (int j = 0; j < R; ++j) { mean[j] = 0; rstd[j] = inv_sqrt<T>(s[j] * invH + eps); }
    }
    if (lane == 0 && L.save_stats)
#pragma unroll
      for (int j = 0; j < R; ++j)
        if (valid[j]) {
          static_cast<C*>(L.rstd)[row[j]] = rstd[j];
          if (F.layer) static_cast<C*>(L.mean)[row[j]] = mean[j];
        }
    T* yp = static_cast<T*>(L.y);
    // A vector's weight / bias in two halves, the result packed as it is made: fewer live
    // registers (a 1024 x 8 block has 64, half of them the row).
    // FOLD (the one-pass rows): (h - mean) rstd as one fma(h, rstd, -mean rstd); its rounding of
    // mean rstd (|mean| < 4 std there, so |mean rstd| < 4) is far below the output's. Not for
    // the exact rows: a constant row (rstd = eps^-1/2) would get that rounding instead of 0.
    auto write_rows = [&](auto fold_tag) {
      constexpr bool FOLD = decltype(fold_tag)::value;
      C nmr[R];
#pragma unroll
      for (int j = 0; j < R; ++j) nmr[j] = -mean[j] * rstd[j];
      constexpr int HV = V > 1 ? V / 2 : 1;
      if constexpr (PS) __pipeline_wait_prior(0);  // (the copies of the first row's pass; a no-op after)
#pragma unroll
      for (int i = 0; i < I; ++i) {
        const int64_t col = int64_t(i * TPR + lane) * V;
        if constexpr (PM == 2) __pipeline_wait_prior(D - 1);  // vector i's group has landed
        if (col >= H) {
          ring_issue(i + D);
          continue;
        }
        P yv[R];
#pragma unroll
        for (int j = 0; j < R; ++j) yv[j] = zero_vec<T>();
#pragma unroll
        for (int q = 0; q < V; q += HV) {
          C w[HV], b[HV];
          const T* ps = reinterpret_cast<const T*>(par_sm + i * TPR + lane) + q;  // (PS only)
          const T* ring = reinterpret_cast<const T*>(par_sm + (i % D) * 2 * TPR + lane) + q;  // (PM == 2 only)
          if (F.w) {
            if (PS && !F.b) load_n<HV>(ps, w);
            else if (PM == 2) load_n<HV>(ring, w);
            else load_param<HV, T, true>(L.w, F.w_f32, col + q, w);
          }
          if (F.b) {
            if (PS) load_n<HV>(ps, b);
            else if (PM == 2) load_n<HV>(ring + TPR * V, b);
            else load_param<HV, T, true>(L.b, F.b_f32, col + q, b);
          }
#pragma unroll
          for (int j = 0; j < R; ++j)
#pragma unroll
            for (int k = 0; k < HV; ++k) {
              const C hk = unpack<T>(h[j][i], q + k);
              C y = FOLD ? fma(hk, rstd[j], nmr[j]) : (hk - mean[j]) * rstd[j];
              if (F.w && F.b) y = fma(y, w[k], b[k]);
              else if (F.w) y *= w[k];
              else if (F.b) y += b[k];
              pack_into<T>(yv[j], q + k, y);
            }
        }
#pragma unroll
        for (int j = 0; j < R; ++j)
          if (valid[j]) *reinterpret_cast<P*>(yp + row[j] * L.y_rs + col) = yv[j];
        ring_issue(i + D);  // (after the slot's values went into the store above)
      }
    };
    if constexpr (ONE_PASS && S != kSpecGeneric) {  // (the generic kernels: one copy of the loop)
      if (F.layer && !exact) {
        write_rows(std::true_type{});
        continue;
      }
    }
    write_rows(std::false_type{});
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
      rstd = inv_sqrt<T>(d * invH + eps);
    } else {
      rstd = inv_sqrt<T>(s * invH + eps);
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

}  // namespace baracuda::norm::kern
