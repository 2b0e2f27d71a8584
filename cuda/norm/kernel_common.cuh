// RMSNorm / LayerNorm: what the forward and backward kernels share (operand flags, vector loads
// and stores, the fixed-order group sums, block shapes). See kernels.cuh.
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
#include "norm/launchers.h"
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

}  // namespace baracuda::norm::kern
