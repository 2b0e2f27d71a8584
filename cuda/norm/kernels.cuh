// RMSNorm / LayerNorm kernels, forward and backward. Included only by the per-dtype translation
// units (norm_<dtype>.cu), which instantiate launch_forward<T> / launch_backward<T>.
//
// Rows are [rows, H] with unit column stride and a per-tensor row stride. A row is handled by
// a group of TPR threads: 8 / 16 / 32 (several rows per 128-thread block) or a whole block
// (128..1024). Half types compute in f32, f64 in f64; one rounding to the output. Every sum has
// a fixed order (butterfly shuffles, then across warps in a fixed order), so results are
// deterministic.
#pragma once
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "common/async_copy.cuh"
#include "common/cluster_device.cuh"
#include "common/cuda_check.h"
#include "common/pdl.cuh"
#include "common/dtype_traits.cuh"
#include "common/packed_vec.cuh"
#include "norm/kernels.h"
#include "norm/norm_launch.h"

namespace baracuda::norm::kern {
using namespace baracuda::kernels;

// What a launch passes, as the register kernels read it: from the NormLaunch at run time
// (kSpecGeneric) or as constants of an operand specialization (launch_spec), which the compiler
// folds, taking the presence / dtype branches out of the per-element code.
struct OperandFlags {
  bool layer, w, w_f32, b, b_f32, res, gres, gw, gb;
};
template <int S> __device__ __forceinline__ OperandFlags operand_flags(const NormLaunch& L) {
  if constexpr (S == kSpecGeneric) {
    return {L.layer, L.w != nullptr, L.w_f32, L.b != nullptr, L.b_f32, L.res != nullptr, L.gres != nullptr,
            L.gw != nullptr, L.gb != nullptr};
  } else {
    constexpr bool layer = S == kSpecLayerWeightBias;
    return {layer, true, false, layer, false, false, false, true, layer};
  }
}
// The launchers' side: go(std::integral_constant<int, S>{}) with the launch's specialization S
// (launch_spec) when `Enabled` (the kernel shape has specialized instantiations), else with
// kSpecGeneric. Returns what go returns.
template <bool Enabled, class Go> decltype(auto) with_operand_spec(const NormLaunch& L, Go&& go) {
  if constexpr (Enabled) {
    switch (launch_spec(L)) {
      case kSpecRmsWeight: return go(std::integral_constant<int, kSpecRmsWeight>{});
      case kSpecLayerWeightBias: return go(std::integral_constant<int, kSpecLayerWeightBias>{});
      default: break;
    }
  }
  return go(std::integral_constant<int, kSpecGeneric>{});
}


// A load of P's bits through the read-only (non-coherent) path, `ld.global.nc`: for data that no
// store of the kernel can reach (weight / bias: select refuses outputs overlapping them). The
// compiler may then move such loads above the kernel's stores; plain loads of a `const void*`
// stay behind every earlier store (it might alias), which serialized the norm forward's output
// loop on the parameters' L2 latency (one vector's weight / bias, then its store, then the next).
template <class P> __device__ __forceinline__ P ldg_bits(const P* p) {
  static_assert(sizeof(P) == 2 || sizeof(P) == 4 || sizeof(P) == 8 || sizeof(P) == 16, "ldg_bits: size");
  using W = std::conditional_t<sizeof(P) == 16, uint4,
            std::conditional_t<sizeof(P) == 8, uint2, std::conditional_t<sizeof(P) == 4, unsigned, unsigned short>>>;
  const W w = __ldg(reinterpret_cast<const W*>(p));
  P r;
  memcpy(&r, &w, sizeof(P));
  return r;
}
template <bool NC, class P> __device__ __forceinline__ P load_bits(const P* p) {
  if constexpr (NC) return ldg_bits(p);
  else return *p;
}

// N consecutive elements of U at p (16-byte aligned when N * sizeof(U) >= 16) -> compute type.
// bf16 pairs are unpacked from 32-bit words (a shift / a mask each: NVVM made the odd element of
// a bf16 load a byte permute and a shift). NC: through the read-only path (ldg_bits).
template <int N, bool NC = false, class U, class C> __device__ __forceinline__ void load_n(const U* p, C* out) {
  constexpr int K = (N * sizeof(U) >= 16) ? int(16 / sizeof(U)) : N;
#pragma unroll
  for (int c = 0; c < N; c += K) {
    if constexpr (std::is_same_v<U, bf16> && K % 2 == 0) {
      const Pack<unsigned, K / 2> v = load_bits<NC>(reinterpret_cast<const Pack<unsigned, K / 2>*>(p + c));
#pragma unroll
      for (int k = 0; k < K / 2; ++k) {
        out[c + 2 * k] = C(__uint_as_float(v.v[k] << 16));
        out[c + 2 * k + 1] = C(__uint_as_float(v.v[k] & 0xffff0000u));
      }
    } else {
      const Pack<U, K> v = load_bits<NC>(reinterpret_cast<const Pack<U, K>*>(p + c));
#pragma unroll
      for (int k = 0; k < K; ++k) out[c + k] = C(to_compute(v.v[k]));
    }
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
// weight / bias: T or f32, chosen at run time (a uniform branch). NC: the read-only path.
template <int N, class T, bool NC = false, class C>
__device__ __forceinline__ void load_param(const void* p, bool f32, int64_t col, C* out) {
  if (f32) load_n<N, NC>(static_cast<const float*>(p) + col, out);
  else load_n<N, NC>(static_cast<const T*>(p) + col, out);
}

// 1 / sqrt(v): correctly rounded (sqrt, then divide) for f32 / f64 outputs; for 16-bit outputs
// rsqrt.approx (within 2 ulp of f32, 2^-22, against a 16-bit rounding of 2^-9..2^-12), one
// instruction where the rounded pair is ~20 with two slow-path branches, per row and thread.
template <class T, class C> __device__ __forceinline__ C inv_sqrt(C v) {
  if constexpr (sizeof(T) == 2) return rsqrtf(v);
  else return C(1) / sqrt(v);
}

// Sums R values each over the TPR threads of a row group (one barrier for all R); `red` holds
// R x 32 shared slots (block groups only; callers alternate slot sets between rows). Every thread
// of the group gets the same bits: butterfly shuffles within each warp, then the NW = TPR / 32
// warp partials in index order, or with BFLY every lane reads the partial of warp (lane % NW) and
// a butterfly over NW lanes adds them (each step adds the same two values in either order, so
// every lane ends with the same sum): fewer instructions than 2 x NW a row, but in the forward
// kernels NVVM then keeps more alive across the reduction (1024 x 8: 20 -> 188 bytes spilled).
template <int TPR, int R, bool BFLY = false, class C>
__device__ __forceinline__ void group_sum_r(C (&v)[R], C* red) {
  constexpr int W = TPR < 32 ? TPR : 32;
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1)
#pragma unroll
    for (int j = 0; j < R; ++j) v[j] += __shfl_xor_sync(0xffffffffu, v[j], o);
  if constexpr (TPR > 32) {
    constexpr int NW = TPR / 32;
    if ((threadIdx.x & 31) == 0)
#pragma unroll
      for (int j = 0; j < R; ++j) red[j * 32 + (threadIdx.x >> 5)] = v[j];
    __syncthreads();
    if constexpr (BFLY) {
#pragma unroll
      for (int j = 0; j < R; ++j) v[j] = red[j * 32 + (threadIdx.x & (NW - 1))];
#pragma unroll
      for (int o = NW / 2; o > 0; o >>= 1)
#pragma unroll
        for (int j = 0; j < R; ++j) v[j] += __shfl_xor_sync(0xffffffffu, v[j], o);
    } else {
#pragma unroll
      for (int j = 0; j < R; ++j) {
        C s = 0;
#pragma unroll 4  // all NW shared loads at once would take NW registers
        for (int i = 0; i < NW; ++i) s += red[j * 32 + i];
        v[j] = s;
      }
    }
  }
}
template <int TPR, class C> __device__ __forceinline__ C group_sum(C v, C* red) {
  C a[1] = {v};
  group_sum_r<TPR, 1>(a, red);
  return a[0];
}
template <int TPR, bool BFLY = false, class C> __device__ __forceinline__ void group_sum2(C& a, C& b, C* red) {
  C v[2] = {a, b};
  group_sum_r<TPR, 2, BFLY>(v, red);
  a = v[0];
  b = v[1];
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

// Row in registers (grad_out and x as packed vectors of T; with XS, x's row goes to dynamic
// shared memory through cp.async and only grad_out stays in registers). Without XS the block's
// share of dweight / dbias accumulates in dynamic shared memory (each thread owns its columns;
// [RPB][SPAN] per gradient) and is written once, as row blockIdx.x of the [partials, H]
// workspace; with XS the column-reduction kernel computes them.
// The accumulators are stored chunk-major: a thread's V columns of vector i are NQ 16-byte
// chunks of E compute elements, chunk (i, q) of lane l at ((i * NQ + q) * TPR + l) * E, so that
// a warp's 16-byte shared accesses are contiguous (no bank conflicts; a lane-major layout with
// 32-byte lanes, as for 16-bit T, conflicts 2-way on every access).
// PF (prefetch, no XS): the group's next row of grad_out and x is brought in while this row is
// reduced, written and accumulated. Block groups copy it (cp.async, each thread its own vectors)
// into shared memory behind the accumulators, as in the forward's PF; small groups (RPB rows per
// block, a few vectors per thread) load it into registers, with its mean and rstd: twice the
// bytes in flight per warp for a handful of registers, where a row is too short for a warp's
// loads to cover the memory latency on their own.
// RA (register accumulators; 16-bit T, no XS): a thread's dweight / dbias columns are the same
// in every row, so they accumulate in registers, and a 16-bit weight is held packed in registers
// for the whole kernel, instead of a shared-memory read-modify-write and a weight load per row.
// Block groups write the partial row straight from the registers; small groups (RPB rows per
// block) store their registers into the shared [RPB][SPAN] accumulators once, at the end, and
// add them in group order there as the shared-memory kernel does.
template <class T, int TPR, int I, bool XS, bool PF, bool RA, int S>
__global__ void __launch_bounds__(block_threads(TPR), XS ? 1 : (RA ? bwd_regacc_min_blocks(TPR, I) : bwd_min_blocks(TPR, I)))
    bwd_reg(const NormLaunch L) {
  using C = compute_t<T>;
  const OperandFlags F = operand_flags<S>(L);
  constexpr int V = 16 / sizeof(T);
  using P = VecOf<T>;
  constexpr int RPB = TPR > 32 ? 1 : 128 / TPR;
  constexpr int SPAN = TPR * I * V;  // padded row length
  constexpr int E = int(16 / sizeof(C));  // compute elements per 16-byte chunk
  constexpr int NQ = V / E;               // chunks per vector (2 for 16-bit T, else 1)
  static_assert(NQ * E == V, "norm backward: vector / chunk mismatch");
  static_assert(!PF || !XS, "norm backward: the prefetching kernel holds x in registers");
  constexpr bool PF_SMEM = PF && RPB == 1, PF_REG = PF && RPB > 1;
  static_assert(!RA || (!XS && sizeof(T) == 2), "norm backward: register accumulators need 16-bit T, no xs");
  if (L.cfg.finish_pdl == 2) pdl_trigger();  // the finish's blocks may be placed (they wait for this grid)
  extern __shared__ __align__(16) unsigned char norm_bwd_dyn[];
  __shared__ C red[2][64];
  const int lane = threadIdx.x % TPR, group = threadIdx.x / TPR;
  const int64_t H = L.H;
  const C invH = C(1) / C(H);
  const bool acc = !XS && (F.gw || F.gb);
  C* accw = reinterpret_cast<C*>(norm_bwd_dyn) + group * SPAN;
  C* accb = reinterpret_cast<C*>(norm_bwd_dyn) + (F.gw ? RPB * SPAN : 0) + group * SPAN;
  P* xsm = reinterpret_cast<P*>(norm_bwd_dyn);
  // PF: [grad_out, x][I][TPR] vectors of the next row, after the accumulators.
  P* next_g = reinterpret_cast<P*>(norm_bwd_dyn + (RA ? 0 : ((F.gw ? 1 : 0) + (F.gb ? 1 : 0)) * SPAN * sizeof(C)));
  P* next_x = next_g + I * TPR;
  const T* gyp = static_cast<const T*>(L.gy);
  const T* xp = static_cast<const T*>(L.x);
  // (One base address per operand and constant offsets, a predicated copy per vector.)
  auto prefetch = [&](int64_t r) {
    if (r < L.rows) {
      const T* g0 = gyp + r * L.gy_rs + int64_t(lane) * V;
      const T* x0 = xp + r * L.x_rs + int64_t(lane) * V;
      const int64_t left = H - int64_t(lane) * V;  // elements from this lane's first column on
#pragma unroll
      for (int i = 0; i < I; ++i) {
        const bool in = int64_t(i) * TPR * V < left;
        cp_async16_if(&next_g[i * TPR + lane], g0 + i * TPR * V, in);
        cp_async16_if(&next_x[i * TPR + lane], x0 + i * TPR * V, in);
      }
    }
    __pipeline_commit();
  };
  if constexpr (PF_SMEM) prefetch(blockIdx.x);
  // PF_REG: the group's next row (grad_out, x, mean, rstd) in registers, loaded one row ahead.
  P ng[PF_REG ? I : 1], nx[PF_REG ? I : 1];
  C nmean = 0, nrstd = 0;
  auto load_next = [&](int64_t r) {
    const bool in_rows = r < L.rows;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      const bool ok = in_rows && col < H;
      ng[i] = ok ? ld_pack<P>(gyp + r * L.gy_rs + col) : zero_vec<T>();
      nx[i] = ok ? ld_pack<P>(xp + r * L.x_rs + col) : zero_vec<T>();
    }
    nmean = (in_rows && F.layer) ? static_cast<const C*>(L.mean)[r] : C(0);
    nrstd = in_rows ? static_cast<const C*>(L.rstd)[r] : C(0);
  };
  if constexpr (PF_REG) load_next(int64_t(blockIdx.x) * RPB + group);
  // RA: the accumulators. WR (RA, or an operand-specialized 16-bit kernel): the weight of this
  // thread's columns, packed in registers for the whole kernel (its columns are the same in every
  // row): no weight load and address per row.
  constexpr bool WR = RA || (sizeof(T) == 2 && S != kSpecGeneric && !XS);
  C ra_w[RA ? I : 1][RA ? V : 1], ra_b[RA ? I : 1][RA ? V : 1];
  P wpk[WR ? I : 1];
  const bool w_packed = WR && F.w && !F.w_f32;
  if constexpr (WR) {
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      wpk[i] = w_packed && col < H ? ld_pack<P>(static_cast<const T*>(L.w) + col) : zero_vec<T>();
    }
  }
  if constexpr (RA) {
#pragma unroll
    for (int i = 0; i < I; ++i)
#pragma unroll
      for (int k = 0; k < V; ++k) ra_w[i][k] = ra_b[i][k] = C(0);
  }
  // One E-chunk of the weight at vector i, chunk q (column col + q * E).
  auto weight_chunk = [&](int i, int q, int64_t col, C* w) {
    if constexpr (WR) {
      if (w_packed) {
#pragma unroll
        for (int e = 0; e < E; ++e) w[e] = unpack<T>(wpk[i], q * E + e);
        return;
      }
    }
    load_param<E, T>(L.w, F.w_f32, col + q * E, w);
  };
  if (acc && !RA) {
    C z[E];
#pragma unroll
    for (int k = 0; k < E; ++k) z[k] = 0;
#pragma unroll
    for (int c = 0; c < I * NQ; ++c) {
      const int o = (c * TPR + lane) * E;
      if (F.gw) store_n<E>(accw + o, z);
      if (F.gb) store_n<E>(accb + o, z);
    }
  }
  int parity = 0;
  for (int64_t base = int64_t(blockIdx.x) * RPB; base < L.rows; base += int64_t(gridDim.x) * RPB, parity ^= 1) {
    const int64_t row = base + group;
    const bool valid = row < L.rows;
    P gp[I];
    P xv[XS ? 1 : I];
    C mean_r = 0, rstd_r = 0;
    if constexpr (PF_SMEM) __pipeline_wait_prior(0);
    if constexpr (PF_REG) {  // this row from the registers, the next one's loads issued
#pragma unroll
      for (int i = 0; i < I; ++i) { gp[i] = ng[i]; xv[i] = nx[i]; }
      mean_r = nmean;
      rstd_r = nrstd;
      load_next(row + int64_t(gridDim.x) * RPB);
    }
#pragma unroll
    for (int i = 0; i < I && !PF_REG; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      const bool ok = valid && col < H;
      if constexpr (PF_SMEM) {
        xv[i] = ok ? next_x[i * TPR + lane] : zero_vec<T>();
        gp[i] = ok ? next_g[i * TPR + lane] : zero_vec<T>();
        continue;
      }
      if constexpr (XS) {
        if (ok) __pipeline_memcpy_async(&xsm[i * TPR + lane], xp + row * L.x_rs + col, 16);
      } else {
        xv[i] = ok ? ld_pack<P>(xp + row * L.x_rs + col) : zero_vec<T>();
      }
      gp[i] = ok ? ld_pack<P>(gyp + row * L.gy_rs + col) : zero_vec<T>();
    }
    if constexpr (XS) __pipeline_commit();
    const C mean = PF_REG ? mean_r : (valid && F.layer) ? static_cast<const C*>(L.mean)[row] : C(0);
    const C rstd = PF_REG ? rstd_r : valid ? static_cast<const C*>(L.rstd)[row] : C(0);
    if constexpr (XS) __pipeline_wait_prior(0);
    auto x_of = [&](int i) -> P {
      if constexpr (XS) return xsm[i * TPR + lane];
      else return xv[i];
    };
    C s1 = 0, s2 = 0;
    // xh = (x - mean) rstd, for 16-bit x as one fma(x, rstd, -mean rstd) (as the cluster kernel's
    // FOLD: the rounding of mean rstd is far below what a 16-bit x resolves of x - mean).
    constexpr bool fold_mean = sizeof(T) == 2;
    const C nmr = -mean * rstd;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      if (!valid || col >= H) continue;
      const P xi = x_of(i);
      // A vector in NQ chunks of E (its accumulator chunks): fewer live registers than all V at once.
#pragma unroll
      for (int q = 0; q < NQ; ++q) {
        C w[E], gyc[E], xh[E];
        if (F.w) weight_chunk(i, q, col, w);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          gyc[e] = unpack<T>(gp[i], q * E + e);
          const C xk = unpack<T>(xi, q * E + e);
          xh[e] = fold_mean ? fma(xk, rstd, nmr) : (xk - mean) * rstd;
          const C g = F.w ? gyc[e] * w[e] : gyc[e];
          s1 += g;
          s2 += g * xh[e];
        }
        if constexpr (RA) {
#pragma unroll
          for (int e = 0; e < E; ++e) {
            ra_w[i][q * E + e] += gyc[e] * xh[e];
            ra_b[i][q * E + e] += gyc[e];
          }
        } else if (acc) {
          const int o = ((i * NQ + q) * TPR + lane) * E;
          C a[E];
          if (F.gw) {
            load_n<E>(accw + o, a);
#pragma unroll
            for (int e = 0; e < E; ++e) a[e] += gyc[e] * xh[e];
            store_n<E>(accw + o, a);
          }
          if (F.gb) {
            load_n<E>(accb + o, a);
#pragma unroll
            for (int e = 0; e < E; ++e) a[e] += gyc[e];
            store_n<E>(accb + o, a);
          }
        }
      }
    }
    group_sum2<TPR, !XS>(s1, s2, red[parity]);  // (XS: 1024-thread blocks at their register limit)
    // Every vector read from next_g / next_x went into s1 / s2 and the block's barrier is behind:
    // the buffers are free for the next row.
    if constexpr (PF_SMEM) prefetch(base + gridDim.x);
    // grad_x = rstd (g - c1 - xh c2), g = gy w, xh = (x - mean) rstd, evaluated as
    // rstd ((gy w - c1) - c2r (x - mean)) with c2r = c2 rstd: four instructions an element, not six;
    // for 16-bit T as rstd (gy w + k - c2r x) with k = c2r mean - c1 (three: the rounding of k is
    // far below the output's, since a 16-bit x resolves (x - mean) only to 2^-8..2^-11 of mean).
    const C c1 = F.layer ? s1 * invH : C(0), c2r = s2 * invH * rstd;
    const C k1 = fold_mean && F.layer ? fma(c2r, mean, -c1) : -c1;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      if (!valid || col >= H) continue;
      const P xi = x_of(i);
      const P r = F.gres ? ld_pack<P>(static_cast<const T*>(L.gres) + row * L.gres_rs + col) : zero_vec<T>();
      P dxv = zero_vec<T>();
#pragma unroll
      for (int q = 0; q < NQ; ++q) {  // chunks of E, packed as they are made (fewer live registers)
        C w[E];
        if (F.w) weight_chunk(i, q, col, w);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const int k = q * E + e;
          const C gy = unpack<T>(gp[i], k);
          const C g1 = F.w ? fma(gy, w[e], k1) : gy + k1;
          C dx = rstd * fma(-c2r, fold_mean ? unpack<T>(xi, k) : unpack<T>(xi, k) - mean, g1);
          if (F.gres) dx += unpack<T>(r, k);
          pack_into<T>(dxv, k, dx);
        }
      }
      *reinterpret_cast<P*>(static_cast<T*>(L.gx) + row * L.gx_rs + col) = dxv;
    }
  }
  if (!acc) return;
  C* pw = partial_w<T>(L) + int64_t(blockIdx.x) * H;
  C* pb = partial_b<T>(L) + int64_t(blockIdx.x) * H;
  if constexpr (RA) {  // this thread's columns: of the block's partial row (block groups), or of
#pragma unroll        // its group's shared accumulators (small groups, added below)
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      if (col >= H) continue;
#pragma unroll
      for (int q = 0; q < NQ; ++q) {
        const int o = ((i * NQ + q) * TPR + lane) * E;
        if (F.gw) store_n<E>(RPB == 1 ? pw + col + q * E : accw + o, &ra_w[i][q * E]);
        if (F.gb) store_n<E>(RPB == 1 ? pb + col + q * E : accb + o, &ra_b[i][q * E]);
      }
    }
    if constexpr (RPB == 1) return;
  }
  // The row groups' sums added in group order (RPB = 1 for block groups), written as
  // consecutive 16-byte chunks of the partial row (coalesced): column chunk c4 is chunk
  // q = c4 % NQ of vector j = c4 / NQ, held by lane j % TPR as its vector j / TPR.
  __syncthreads();
  const C* aw0 = reinterpret_cast<const C*>(norm_bwd_dyn);
  const C* ab0 = aw0 + (F.gw ? RPB * SPAN : 0);
  for (int c4 = threadIdx.x; int64_t(c4) * E < H; c4 += blockDim.x) {
    const int j = c4 / NQ, q = c4 % NQ;
    const int so = (((j / TPR) * NQ + q) * TPR + j % TPR) * E;
    C tw[E], tb[E], a[E];
#pragma unroll
    for (int e = 0; e < E; ++e) tw[e] = tb[e] = 0;
#pragma unroll
    for (int gi = 0; gi < RPB; ++gi) {
      if (F.gw) {
        load_n<E>(aw0 + gi * SPAN + so, a);
#pragma unroll
        for (int e = 0; e < E; ++e) tw[e] += a[e];
      }
      if (F.gb) {
        load_n<E>(ab0 + gi * SPAN + so, a);
#pragma unroll
        for (int e = 0; e < E; ++e) tb[e] += a[e];
      }
    }
    if (F.gw) store_n<E>(pw + int64_t(c4) * E, tw);
    if (F.gb) store_n<E>(pb + int64_t(c4) * E, tb);
  }
}

// Dynamic shared memory of bwd_reg: x's row (XS) or the dweight / dbias accumulators.
inline int64_t bwd_reg_smem(const NormLaunch& L, int compute_bytes) {
  const Config& c = L.cfg;
  if (c.xs) return int64_t(c.tpr) * c.items * 16;
  const int nacc = c.regacc && rows_per_block(c.tpr) == 1 ? 0 : (L.gw ? 1 : 0) + (L.gb ? 1 : 0);
  const int64_t span = int64_t(c.tpr) * c.items * c.vec;
  return int64_t(rows_per_block(c.tpr)) * span * compute_bytes * nacc + (c.prefetch ? bwd_prefetch_smem(c.tpr, c.items) : 0);
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

// dweight / dbias partials of the looped and XS paths: block (x: kColredThreads x V columns,
// y: a chunk of rows); rows in order, four rows' loads issued together.
template <class T, int V>
__global__ void __launch_bounds__(kColredThreads) colred(const NormLaunch L) {
  using C = compute_t<T>;
  if (L.cfg.finish_pdl == 2) pdl_trigger();  // the finish's blocks may be placed (they wait for this grid)
  const int64_t col = (int64_t(blockIdx.x) * kColredThreads + threadIdx.x) * V;
  if (col >= L.H) return;
  const int64_t r0 = int64_t(blockIdx.y) * L.cfg.rows_per_chunk;
  const int64_t r1 = r0 + L.cfg.rows_per_chunk < L.rows ? r0 + L.cfg.rows_per_chunk : L.rows;
  const T* gy = static_cast<const T*>(L.gy);
  const T* x = static_cast<const T*>(L.x);
  const C* mean = static_cast<const C*>(L.mean);
  const C* rstd = static_cast<const C*>(L.rstd);
  C aw[V], ab[V];
#pragma unroll
  for (int k = 0; k < V; ++k) aw[k] = ab[k] = 0;
  constexpr int U = 4;
  int64_t r = r0;
  for (; r + U <= r1; r += U) {
    C g[U][V], xv[U][V], m[U], rs[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      load_n<V>(gy + (r + u) * L.gy_rs + col, g[u]);
      load_n<V>(x + (r + u) * L.x_rs + col, xv[u]);
      m[u] = L.layer ? mean[r + u] : C(0);
      rs[u] = rstd[r + u];
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        aw[k] += g[u][k] * ((xv[u][k] - m[u]) * rs[u]);
        ab[k] += g[u][k];
      }
  }
  for (; r < r1; ++r) {
    C g[V], xv[V];
    load_n<V>(gy + r * L.gy_rs + col, g);
    load_n<V>(x + r * L.x_rs + col, xv);
    const C m = L.layer ? mean[r] : C(0), rs = rstd[r];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      aw[k] += g[k] * ((xv[k] - m) * rs);
      ab[k] += g[k];
    }
  }
  if (L.gw) store_n<V>(partial_w<T>(L) + int64_t(blockIdx.y) * L.H + col, aw);
  if (L.gb) store_n<V>(partial_b<T>(L) + int64_t(blockIdx.y) * L.H + col, ab);
}

// dweight / dbias from their [P, H] partial rows (P: the row chunks of the backward kernel), both
// gradients in one launch (grid.y). A block: 32 column groups of V columns (one 16-byte load per
// partial row when V > 1) x TY slices of the partial rows. Sum order, fixed by (P, H, TY): each
// thread its rows p = s, s + TY, ... (s its slice), then the TY slices in order. The partials are
// mostly L2-resident (written last by the kernel before), so the cost is blocks and latency, not
// bytes: four loads in flight per thread, few blocks. H100, LayerNorm bf16, the span of
// the backward (tools/profile_one.py --timeline): 2048 x 65536 (30 partials) 320.4 us with TY = 8
// against 336.7 at TY = 32 (338.5 without PDL) and 338.3 for the kernel before (two launches,
// 1024-thread blocks of 32 columns, one scalar load each); 4096 x 16384 150.3 vs 155.8 at TY = 32. Clusters of blocks
// splitting the partial rows measured slower everywhere (4096 x 16384: 167 / 188 / 231 us at 2 /
// 4 / 8 blocks) or equal (262144 x 128).
template <class C> struct FinishArgs {
  const C* part[2];  // [P, H] partial rows of gradient 0 / 1 (grid.y)
  void* out[2];      // [H] gradient (T, or float where f32)
  bool f32[2];
  int64_t P = 0, H = 0;
};
template <class T, int V>
__global__ void __launch_bounds__(1024) finish(const FinishArgs<compute_t<T>> a) {
  using C = compute_t<T>;
  __shared__ __align__(16) C sm[32][32 * V];  // [slice][column of the block]
  pdl_wait();  // launched early (PDL): from here on the partials are written
  const int tx = threadIdx.x, ty = threadIdx.y, TY = int(blockDim.y);
  const int64_t col = (int64_t(blockIdx.x) * 32 + tx) * V;
  const C* part = a.part[blockIdx.y];
  const int64_t H = a.H, P = a.P;
  C t[V];
#pragma unroll
  for (int k = 0; k < V; ++k) t[k] = 0;
  if (col < H) {
    int64_t p = ty;
    for (; p + 3 * TY < P; p += 4 * TY) {  // four loads issued, then added in row order
      C v[4][V];
#pragma unroll
      for (int u = 0; u < 4; ++u) load_n<V>(part + (p + u * TY) * H + col, v[u]);
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) t[k] += v[u][k];
    }
    for (; p < P; p += TY) {
      C v[V];
      load_n<V>(part + p * H + col, v);
#pragma unroll
      for (int k = 0; k < V; ++k) t[k] += v[k];
    }
  }
  store_n<V>(&sm[ty][tx * V], t);
  __syncthreads();
  if (ty == 0 && col < H) {  // the slices in order; scalar stores (the gradient may be 2-byte aligned)
#pragma unroll
    for (int k = 0; k < V; ++k) t[k] = 0;
    for (int j = 0; j < TY; ++j) {
      C v[V];
      load_n<V>(&sm[j][tx * V], v);
#pragma unroll
      for (int k = 0; k < V; ++k) t[k] += v[k];
    }
    void* out = a.out[blockIdx.y];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (a.f32[blockIdx.y]) static_cast<float*>(out)[col + k] = float(t[k]);
      else static_cast<T*>(out)[col + k] = from_compute<T>(t[k]);
    }
  }
}

// ---- launchers ------------------------------------------------------------------------------------
// Dynamic shared memory above the default 48 KB needs an opt-in per kernel (and device).
template <class K> void allow_smem(K kernel, int64_t bytes) {
  allow_dynamic_smem(kernel, size_t(bytes), "cudaFuncSetAttribute(norm, max dynamic shared memory)");
}

template <class T, int TPR, int I, int R, bool PF> void fwd_kernel_go(const NormLaunch& L, cudaStream_t s) {
  with_operand_spec<sizeof(T) == 2 && fwd_spec_shape(TPR, I, R, PF)>(L, [&](auto spec) {
    constexpr int S = decltype(spec)::value;
    if constexpr (S != kSpecGeneric && fwd_param_smem_supported(TPR, I, R, PF)) {
      auto go = [&](auto kernel, int64_t smem) {
        allow_smem(kernel, smem);
        kernel<<<unsigned(L.cfg.grid), block_threads(TPR), size_t(smem), s>>>(L);
      };
      // (select sets param_smem only where these kernels exist)
      if constexpr (TPR == 1024)  // (the resident parameter: the one-block-per-SM shape only)
        if (L.cfg.param_smem == 1) return go(fwd_reg<T, TPR, I, R, PF, S, 1>, fwd_prefetch_smem(TPR, I));
      if (L.cfg.param_smem == 2) return go(fwd_reg<T, TPR, I, R, PF, S, 2>, fwd_param_ring_smem(TPR));
    }
    const auto kernel = fwd_reg<T, TPR, I, R, PF, S>;
    const int64_t smem = PF ? fwd_prefetch_smem(TPR, I) : 0;
    if (PF) allow_smem(kernel, smem);
    kernel<<<unsigned(L.cfg.grid), block_threads(TPR), size_t(smem), s>>>(L);
  });
}
template <class T, int TPR, int I, int R> void fwd_kernel(const NormLaunch& L, cudaStream_t s) {
  if constexpr (R == 1 && fwd_prefetch_supported(TPR, I)) {
    if (L.cfg.prefetch && !L.res) return fwd_kernel_go<T, TPR, I, 1, true>(L, s);  // select never asks for it with a residual
  }
  fwd_kernel_go<T, TPR, I, R, false>(L, s);
}
template <class T, int TPR, int I, bool XS, bool PF, bool RA = false>
void bwd_kernel_go(const NormLaunch& L, cudaStream_t s) {
  with_operand_spec<!XS && sizeof(T) == 2 && bwd_spec_shape(TPR, I, PF, RA)>(L, [&](auto spec) {
    const auto kernel = bwd_reg<T, TPR, I, XS, PF, RA, decltype(spec)::value>;
    const int64_t smem = bwd_reg_smem(L, int(sizeof(compute_t<T>)));
    allow_smem(kernel, smem);
    kernel<<<unsigned(L.cfg.grid), block_threads(TPR), size_t(smem), s>>>(L);
  });
}
template <class T, int TPR, int I, bool XS> void bwd_kernel(const NormLaunch& L, cudaStream_t s) {
  if constexpr (!XS && sizeof(T) == 2 && bwd_regacc_supported(TPR, I)) {
    if (L.cfg.regacc) {
      if constexpr (bwd_prefetch_supported(TPR, I)) {
        if (L.cfg.prefetch) return bwd_kernel_go<T, TPR, I, false, true, true>(L, s);
      }
      return bwd_kernel_go<T, TPR, I, false, false, true>(L, s);
    }
  }
  if constexpr (!XS && bwd_prefetch_supported(TPR, I)) {
    if (L.cfg.prefetch) return bwd_kernel_go<T, TPR, I, false, true>(L, s);
  }
  bwd_kernel_go<T, TPR, I, XS, false>(L, s);
}

template <class T, int TPR, int I> bool fwd_rows(const NormLaunch& L, cudaStream_t s) {
  switch (L.cfg.rows) {
    case 1: if constexpr (fwd_supported(TPR, I, 1)) { fwd_kernel<T, TPR, I, 1>(L, s); return true; } break;
    case 2: if constexpr (fwd_supported(TPR, I, 2)) { fwd_kernel<T, TPR, I, 2>(L, s); return true; } break;
    case 4: if constexpr (fwd_supported(TPR, I, 4)) { fwd_kernel<T, TPR, I, 4>(L, s); return true; } break;
  }
  return false;
}
template <class T, int TPR, int I> bool bwd_xs(const NormLaunch& L, cudaStream_t s) {
  if (L.cfg.xs) {
    if constexpr (bwd_supported(TPR, I, true)) { bwd_kernel<T, TPR, I, true>(L, s); return true; }
  } else {
    if constexpr (bwd_supported(TPR, I, false)) { bwd_kernel<T, TPR, I, false>(L, s); return true; }
  }
  return false;
}
template <bool BWD, class T, int TPR, int I> bool reg_one(const NormLaunch& L, cudaStream_t s) {
  if constexpr (BWD) return bwd_xs<T, TPR, I>(L, s);
  else return fwd_rows<T, TPR, I>(L, s);
}

template <bool BWD, class T, int TPR> bool reg_items(const NormLaunch& L, cudaStream_t s) {
  switch (L.cfg.items) {
    case 1: return reg_one<BWD, T, TPR, 1>(L, s);
    case 2: return reg_one<BWD, T, TPR, 2>(L, s);
    case 3: return reg_one<BWD, T, TPR, 3>(L, s);
    case 4: return reg_one<BWD, T, TPR, 4>(L, s);
    case 5: return reg_one<BWD, T, TPR, 5>(L, s);
    case 6: return reg_one<BWD, T, TPR, 6>(L, s);
    case 7: return reg_one<BWD, T, TPR, 7>(L, s);
    case 8: return reg_one<BWD, T, TPR, 8>(L, s);
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

// dweight and / or dbias from the partials at pw / pb (P rows of H), into L.gw / L.gb: blocks of 32
// column groups (16 bytes when H allows) x TY slices (8, up to 32 for many partials, fewer for
// P < 32; L.cfg.finish_ty overrides). On sm_90 the launch is programmatic (PDL, L.cfg.finish_pdl):
// it overlaps the end of the row kernel before (which triggers it as it starts), whose writes the
// blocks wait for (pdl_wait).
template <class T, class C> void finish_params(const NormLaunch& L, const C* pw, const C* pb, int64_t P, cudaStream_t s) {
  FinishArgs<C> a;
  int n = 0;
  if (L.gw) { a.part[n] = pw; a.out[n] = L.gw; a.f32[n] = L.w_f32; ++n; }
  if (L.gb) { a.part[n] = pb; a.out[n] = L.gb; a.f32[n] = L.b_f32; ++n; }
  if (n == 0 || L.H == 0) return;
  a.P = P;
  a.H = L.H;
  constexpr int VV = int(16 / sizeof(C));
  const bool vec = L.H % VV == 0;
  // 8 slices, more while a thread would add over 32 partial rows (few columns, many partials:
  // 262144 x 128 had 95 us with 8 slices, 79 with 32), fewer where 4 rows a thread cover P
  int ty = 8;
  while (ty < 32 && P > int64_t(32) * ty) ty *= 2;
  while (ty > 1 && int64_t(ty / 2) * 4 >= P) ty /= 2;
  const int fty = L.cfg.finish_ty;
  if (fty >= 1 && fty <= 32 && (fty & (fty - 1)) == 0) ty = fty;
  // griddepcontrol.wait exists only in the kernel's sm_90 code (which also means an sm_90+ device):
  // no PDL where the device runs older PTX
  const bool pdl = L.cfg.finish_pdl != 0 && runs_sm90_code(finish<T, 1>);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(ceil_div(ceil_div(L.H, int64_t(vec ? VV : 1)), int64_t(32))), unsigned(n));
  cfg.blockDim = dim3(32, unsigned(ty));
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  if (pdl) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  const char* what = "norm finish (grad_weight / grad_bias)";
  if (vec) cuda_check(cudaLaunchKernelEx(&cfg, finish<T, VV>, a), what);
  else cuda_check(cudaLaunchKernelEx(&cfg, finish<T, 1>, a), what);
}

// The cluster forward (sm_90; fwd_cluster.cuh, instantiated in norm_fwd_<dtype>.cu): false, with
// nothing launched, on a device without clusters (or a build without sm_90 code).
template <class T> bool fwd_cluster_launch(const NormLaunch& L, cudaStream_t s);

template <class T> void launch_forward_impl(const NormLaunch& L, cudaStream_t s) {
  if (L.rows == 0 || L.H == 0) return;
  if (L.cfg.path == Path::Cluster) {
    if (fwd_cluster_launch<T>(L, s)) return;
    NormLaunch L2 = L;  // before sm_90: the one-block register kernel or the loop
    L2.cfg = cluster_fallback_config(L.dtype, L.layer, L.H, L.rows);
    return launch_forward_impl<T>(L2, s);
  }
  const bool ok = L.cfg.path == Path::Registers ? reg_launch<false, T>(L, s) : loop_launch<false, T>(L, s);
  if (!ok) throw Unsupported("norm: no forward kernel for this configuration (internal)");
  check_launch(L.cfg.path == Path::Registers ? "norm forward (registers)" : "norm forward (looped)");
}

// The cluster backward (sm_90; fwd_cluster.cuh, instantiated in norm_bwd_<dtype>.cu): false, with
// nothing launched, on a device without clusters (or a build without sm_90 code).
template <class T> bool bwd_cluster_launch(const NormLaunch& L, cudaStream_t s);

template <class T> void launch_backward_impl(const NormLaunch& L, cudaStream_t s) {
  using C = compute_t<T>;
  if (L.cfg.path == Path::Cluster) {
    if (L.rows > 0 && L.H > 0 && bwd_cluster_launch<T>(L, s)) {
      const int64_t P = L.cfg.partials;
      const C* pw = static_cast<const C*>(L.workspace);
      const C* pb = reinterpret_cast<const C*>(static_cast<const char*>(L.workspace) + L.bias_partial_offset);
      finish_params<T>(L, pw, pb, P, s);
      return;
    }
    // Before sm_90 (or no rows): the one-block xs kernel or the loop, with its own partials (the
    // plan's workspace holds the looped partition's, which equals the xs kernel's).
    NormLaunch L2 = L;
    L2.cfg = cluster_fallback_config(L.dtype, L.layer, L.H, L.rows, true);
    L2.bias_partial_offset = L.gw ? partial_bytes(L.dtype, L2.cfg.partials, L.H) : 0;
    return launch_backward_impl<T>(L2, s);
  }
  if (L.rows > 0 && L.H > 0) {
    const bool ok = L.cfg.path == Path::Registers ? reg_launch<true, T>(L, s) : loop_launch<true, T>(L, s);
    if (!ok) throw Unsupported("norm: no backward kernel for this configuration (internal)");
    check_launch(L.cfg.path == Path::Registers ? "norm backward (registers)" : "norm backward (looped)");
    if ((L.cfg.path == Path::Looped || L.cfg.xs) && (L.gw || L.gb)) {
      constexpr int VV = int(16 / sizeof(T));
      const int cv = L.cfg.colred_vec;
      const dim3 grid(unsigned(ceil_div(L.H, int64_t(kColredThreads) * cv)), unsigned(L.cfg.partials));
      if (cv > 1) colred<T, VV><<<grid, kColredThreads, 0, s>>>(L);
      else colred<T, 1><<<grid, kColredThreads, 0, s>>>(L);
      check_launch("norm backward column reduction");
    }
  }
  if (L.H == 0) return;
  const int64_t P = L.rows > 0 ? L.cfg.partials : 0;  // no rows: zero gradients
  const C* pw = static_cast<const C*>(L.workspace);
  const C* pb = reinterpret_cast<const C*>(static_cast<const char*>(L.workspace) + L.bias_partial_offset);
  finish_params<T>(L, pw, pb, P, s);
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

// Explicit instantiation of one dtype's launchers (norm_fwd_<dtype>.cu, norm_bwd_<dtype>.cu).
#define BARACUDA_NORM_INSTANTIATE_FWD(T) \
  template void baracuda::norm::launch_forward<T>(const baracuda::norm::NormLaunch&, void*);
#define BARACUDA_NORM_INSTANTIATE_BWD(T) \
  template void baracuda::norm::launch_backward<T>(const baracuda::norm::NormLaunch&, void*);
