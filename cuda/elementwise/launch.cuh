// The one elementwise engine: every category is a functor run by these kernels.
//   contiguous: every operand dense in iteration order (or a single broadcast element);
//               16-byte vector access when every pointer is 16-byte aligned.
//   inner:      the innermost dim has stride 1 or 0 for every operand (bias adds, row /
//               column broadcasts): vectors along it, outer dims by fast division per chunk.
//   transposed: one input whose unit-stride dim is not the output's: shared-memory tiles.
//   strided:    any strides (0 = broadcast, negative allowed) over a coalesced iteration
//               space; one fast division per dimension per element.
// The last three index in 32 bits: the plan splits larger launches (split_to_index32).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cuda/std/tuple>
#include <utility>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/index32_pieces.h"
#include "common/packed_vec.cuh"
#include "elementwise/elementwise_launch.h"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

#ifndef BARACUDA_EW_THREADS
#define BARACUDA_EW_THREADS 256
#endif
constexpr int kThreads = BARACUDA_EW_THREADS;  // threads per block of the map kernels
// Bytes of the widest operand each thread keeps in flight on the vector paths.
#ifndef BARACUDA_EW_BYTES_IN_FLIGHT
#define BARACUDA_EW_BYTES_IN_FLIGHT 32
#endif
// Blocks per SM the vector kernels are compiled for (caps registers per thread).
#ifndef BARACUDA_EW_MIN_BLOCKS
#define BARACUDA_EW_MIN_BLOCKS 1
#endif
// Below this many blocks (a few waves on a 132-SM GPU) the contiguous kernel gives each
// thread one chunk: the grid balances better than with fewer, longer threads.
constexpr int64_t kSmallGridBlocks = 4096;
template <int ChunkBytes> constexpr int unroll_for() { return std::max(1, BARACUDA_EW_BYTES_IN_FLIGHT / ChunkBytes); }


// ---- contiguous --------------------------------------------------------------------------
template <int N, class T>
__device__ __forceinline__ void load_chunk(Pack<T, N>& c, const T* p, int64_t i, bool scalar) {
  if (scalar) {
    const T s = p[0];
#pragma unroll
    for (int k = 0; k < N; ++k) c.v[k] = s;
  } else {
    c = *reinterpret_cast<const Pack<T, N>*>(p + i);
  }
}

template <int N, class Fn, class Tout, class... Tin, size_t... I>
__device__ __forceinline__ void contig_apply(const Fn& fn, Pack<Tout, N>& y,
                                             cuda::std::tuple<Pack<Tin, N>...>& x,
                                             std::index_sequence<I...>) {
  fn.template map<N>(y.v, cuda::std::get<I>(x).v...);
}

template <int N, class... Tin, size_t... I>
__device__ __forceinline__ void contig_load(cuda::std::tuple<Pack<Tin, N>...>& x, int64_t i, uint32_t smask,
                                            std::index_sequence<I...>, const Tin*... in) {
  (load_chunk<N>(cuda::std::get<I>(x), in, i, (smask >> I) & 1u), ...);
}

template <int N, int UNROLL, class Fn, class Tout, class... Tin>
__global__ void __launch_bounds__(kThreads, BARACUDA_EW_MIN_BLOCKS)
ew_contiguous_kernel(Fn fn, int64_t n, uint32_t smask, Tout* out, const Tin*... in) {
  using Seq = std::index_sequence_for<Tin...>;
  const int64_t nchunks = n / N;
  const int64_t first = int64_t(blockIdx.x) * kThreads * UNROLL + threadIdx.x;
  cuda::std::tuple<Pack<Tin, N>...> x[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const int64_t c = first + int64_t(u) * kThreads;
    if (c < nchunks) contig_load<N, Tin...>(x[u], c * N, smask, Seq{}, in...);
  }
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const int64_t c = first + int64_t(u) * kThreads;
    if (c < nchunks) {
      Pack<Tout, N> y;
      contig_apply<N>(fn, y, x[u], Seq{});
      *reinterpret_cast<Pack<Tout, N>*>(out + c * N) = y;
    }
  }
  if constexpr (N > 1) {  // the last n % N elements, one per thread of block 0
    const int64_t i = nchunks * N + threadIdx.x;
    if (blockIdx.x == 0 && i < n) {
      cuda::std::tuple<Pack<Tin, 1>...> xs;
      contig_load<1, Tin...>(xs, i, smask, Seq{}, in...);
      Pack<Tout, 1> y;
      contig_apply<1>(fn, y, xs, Seq{});
      out[i] = y.v[0];
    }
  }
}

// ---- strided -----------------------------------------------------------------------------
// n / d and n % d for 32-bit n by multiply-high and shift (d fixed per launch).
struct FastDiv {
  uint32_t d = 1, mul = 0, shift = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    while ((uint64_t(1) << shift) < d) ++shift;
    mul = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1);
  }
  __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(n, mul);
#else
    const uint32_t hi = uint32_t((uint64_t(n) * mul) >> 32);
#endif
    return uint32_t((uint64_t(hi) + n) >> shift);
  }
};

template <int NARGS>
struct Indexer {
  int rank = 0;                          // dims stored innermost first
  FastDiv div[kMaxRank];
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxRank][NARGS] = {};
  __device__ __forceinline__ void offsets(uint32_t linear, int64_t (&off)[NARGS]) const {
#pragma unroll
    for (int a = 0; a < NARGS; ++a) off[a] = 0;
#pragma unroll
    for (int d = 0; d < kMaxRank; ++d) {
      if (d == rank) break;
      const uint32_t q = div[d].div(linear);
      const int64_t r = int64_t(linear - q * uint32_t(size[d]));
#pragma unroll
      for (int a = 0; a < NARGS; ++a) off[a] += r * stride[d][a];
      linear = q;
    }
  }
};

template <class Fn, class Tout, class... Tin, size_t... I>
__device__ __forceinline__ Tout strided_apply(const Fn& fn, const int64_t* off, std::index_sequence<I...>,
                                              const Tin*... in) {
  cuda::std::tuple<Pack<Tin, 1>...> x;
  ((cuda::std::get<I>(x).v[0] = in[off[I + 1]]), ...);
  Pack<Tout, 1> y;
  fn.template map<1>(y.v, cuda::std::get<I>(x).v...);
  return y.v[0];
}

template <int NARGS, class Fn, class Tout, class... Tin>
__global__ void __launch_bounds__(kThreads)
ew_strided_kernel(Fn fn, Indexer<NARGS> ix, uint32_t n, Tout* out, const Tin*... in) {
  constexpr int kIlp = 4;
  const uint32_t base = blockIdx.x * kThreads * kIlp + threadIdx.x;
  int64_t off[kIlp][NARGS];
#pragma unroll
  for (int u = 0; u < kIlp; ++u) {
    const uint32_t i = base + uint32_t(u) * kThreads;
    if (i < n) ix.offsets(i, off[u]);
  }
#pragma unroll
  for (int u = 0; u < kIlp; ++u) {
    const uint32_t i = base + uint32_t(u) * kThreads;
    if (i < n) out[off[u][0]] = strided_apply<Fn, Tout, Tin...>(fn, off[u], std::index_sequence_for<Tin...>{}, in...);
  }
}

// ---- inner-contiguous ------------------------------------------------------------------
// Every operand's innermost dim has stride 1 or 0 (a bias, a row- or column-broadcast):
// 16-byte vectors along it, outer dims through the indexer once per chunk.
template <int N, class... Tin, size_t... I>
__device__ __forceinline__ void inner_load(cuda::std::tuple<Pack<Tin, N>...>& x, const int64_t* off, uint32_t inner,
                                           std::index_sequence<I...>, const Tin*... in) {
  (load_chunk<N>(cuda::std::get<I>(x), in + off[I + 1], 0, !((inner >> (I + 1)) & 1u)), ...);
}

template <int N, int UNROLL, int NARGS, class Fn, class Tout, class... Tin>
__global__ void __launch_bounds__(kThreads, BARACUDA_EW_MIN_BLOCKS)
ew_inner_kernel(Fn fn, Indexer<NARGS> outer, uint32_t inner, FastDiv per_row, uint32_t nchunks, Tout* out,
                const Tin*... in) {
  using Seq = std::index_sequence_for<Tin...>;
  const uint32_t first = blockIdx.x * kThreads * UNROLL + threadIdx.x;
  cuda::std::tuple<Pack<Tin, N>...> x[UNROLL];
  int64_t out_off[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const uint32_t c = first + u * kThreads;
    if (c < nchunks) {
      const uint32_t row = per_row.div(c);
      const int64_t col = int64_t(c - row * per_row.d) * N;
      int64_t off[NARGS];
      outer.offsets(row, off);
#pragma unroll
      for (int a = 0; a < NARGS; ++a)
        if ((inner >> a) & 1u) off[a] += col;
      out_off[u] = off[0];
      inner_load<N, Tin...>(x[u], off, inner, Seq{}, in...);
    }
  }
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const uint32_t c = first + u * kThreads;
    if (c < nchunks) {
      Pack<Tout, N> y;
      contig_apply<N>(fn, y, x[u], Seq{});
      *reinterpret_cast<Pack<Tout, N>*>(out + out_off[u]) = y;
    }
  }
}

// ---- transposed (one input) ---------------------------------------------------------------
// The output's unit-stride dim is not the input's (x.t(), a permuted copy): a 32x32 tile goes
// through shared memory so both the read and the write are coalesced.
constexpr int kTile = 32;
template <class Fn, class Tout, class Tin>
__global__ void __launch_bounds__(kTile * 8)
ew_transpose_kernel(Fn fn, Indexer<2> outer, FastDiv tiles_i, FastDiv tiles_ij, uint32_t size_i,
                    uint32_t size_j, int64_t in_stride_i, int64_t out_stride_j, Tout* out, const Tin* in) {
  __shared__ Tin tile[kTile][kTile + 1];
  const uint32_t b = blockIdx.x;
  const uint32_t o = tiles_ij.div(b);
  const uint32_t t = b - o * tiles_ij.d;
  const uint32_t tj = tiles_i.div(t), ti = t - tj * tiles_i.d;
  int64_t off[2];
  outer.offsets(o, off);
  const uint32_t i0 = ti * kTile, j0 = tj * kTile;
#pragma unroll
  for (int k = 0; k < kTile; k += 8) {  // read: consecutive threads walk the input's unit-stride dim j
    const uint32_t j = j0 + threadIdx.x, i = i0 + threadIdx.y + k;
    if (j < size_j && i < size_i) tile[threadIdx.y + k][threadIdx.x] = in[off[1] + int64_t(i) * in_stride_i + j];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kTile; k += 8) {  // write: consecutive threads walk the output's unit-stride dim i
    const uint32_t i = i0 + threadIdx.x, j = j0 + threadIdx.y + k;
    if (j < size_j && i < size_i) {
      Pack<Tin, 1> x;
      x.v[0] = tile[threadIdx.x][threadIdx.y + k];
      Pack<Tout, 1> y;
      fn.template map<1>(y.v, x.v);
      out[off[0] + int64_t(j) * out_stride_j + i] = y.v[0];
    }
  }
}

// ---- host launcher -------------------------------------------------------------------------
inline bool aligned_to(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

template <class Tout, class... Tin> constexpr int min_size() { return int(std::min({sizeof(Tout), sizeof(Tin)...})); }
template <class Tout, class... Tin> constexpr int max_size() { return int(std::max({sizeof(Tout), sizeof(Tin)...})); }

template <class Fn, class Tout, class... Tin, size_t... I>
void launch_map_impl(const Fn& fn, const elementwise::EwLaunch& L, cudaStream_t stream, const char* name,
                     std::index_sequence<I...>) {
  constexpr int NIN = sizeof...(Tin);
  Tout* out = static_cast<Tout*>(L.out);
  if (L.contiguous) {
    constexpr int N = std::max(1, std::min(16, 16 / min_size<Tout, Tin...>()));
    constexpr int UNROLL = unroll_for<N * max_size<Tout, Tin...>()>();
    bool vec_ok = aligned_to(L.out, alignof(Pack<Tout, N>));
    ((vec_ok = vec_ok && (((L.scalar_mask >> I) & 1u) ||
                          aligned_to(L.in[I], alignof(Pack<Tin, N>)))), ...);
    if (vec_ok) {
      const int64_t chunks = L.numel / N;
      const int64_t blocks = std::max<int64_t>(1, (chunks + kThreads * UNROLL - 1) / (kThreads * UNROLL));
      if (UNROLL > 1 && blocks < kSmallGridBlocks) {  // small tensors: more, shorter blocks
        ew_contiguous_kernel<N, 1, Fn, Tout, Tin...>
            <<<dim3(unsigned(std::max<int64_t>(1, (chunks + kThreads - 1) / kThreads))), kThreads, 0, stream>>>(
                fn, L.numel, L.scalar_mask, out, static_cast<const Tin*>(L.in[I])...);
      } else {
        ew_contiguous_kernel<N, UNROLL, Fn, Tout, Tin...><<<dim3(unsigned(blocks)), kThreads, 0, stream>>>(
            fn, L.numel, L.scalar_mask, out, static_cast<const Tin*>(L.in[I])...);
      }
    } else {
      constexpr int U = 4;
      const int64_t blocks = (L.numel + kThreads * U - 1) / (kThreads * U);
      ew_contiguous_kernel<1, U, Fn, Tout, Tin...><<<dim3(unsigned(blocks)), kThreads, 0, stream>>>(
          fn, L.numel, L.scalar_mask, out, static_cast<const Tin*>(L.in[I])...);
    }
  } else {
    if (L.numel >= kIndex32Limit)  // the plan splits these (split_to_index32)
      throw Unsupported(std::string(name) + ": a non-contiguous launch of 2^31 elements or more");
    const int64_t blocks = (L.numel + kThreads * 4 - 1) / (kThreads * 4);
    auto fill = [&](auto& ix, int rank) {  // the outermost `rank` dims of L, innermost first
      ix.rank = rank;
      for (int d = 0; d < rank; ++d) {
        const int src = rank - 1 - d;
        ix.size[d] = L.shape[src];
        ix.div[d] = FastDiv(uint32_t(std::min<int64_t>(L.shape[src], 0xffffffffll)));
        for (int a = 0; a < NIN + 1; ++a) ix.stride[d][a] = L.stride[a][src];
      }
    };
    if constexpr (NIN == 1) {
      if (L.transpose_dim >= 0) {
        const int j = L.transpose_dim, inner = L.rank - 1;
        Indexer<2> outer;
        int64_t n_outer = 1;
        for (int d = L.rank - 1; d >= 0; --d) {  // every dim but j and the innermost, innermost first
          if (d == j || d == inner) continue;
          const int k = outer.rank++;
          outer.size[k] = L.shape[d];
          outer.div[k] = FastDiv(uint32_t(L.shape[d]));
          outer.stride[k][0] = L.stride[0][d];
          outer.stride[k][1] = L.stride[1][d];
          n_outer *= L.shape[d];
        }
        const uint32_t si = uint32_t(L.shape[inner]), sj = uint32_t(L.shape[j]);
        const uint32_t ti = (si + kTile - 1) / kTile, tj = (sj + kTile - 1) / kTile;
        ew_transpose_kernel<Fn, Tout, Tin...><<<unsigned(n_outer * ti * tj), dim3(kTile, 8), 0, stream>>>(
            fn, outer, FastDiv(ti), FastDiv(ti * tj), si, sj, L.stride[1][inner], L.stride[0][j], out,
            static_cast<const Tin*>(L.in[I])...);
        check_launch(name);
        return;
      }
    }
    if (L.inner_contiguous) {
      // Vectors along the inner dim when it divides and every vector-loaded operand's base
      // and outer strides are aligned; one element per step otherwise (same kernel shape).
      constexpr int N = std::max(1, std::min(16, 16 / min_size<Tout, Tin...>()));
      // Fewer bytes in flight than the contiguous kernel: the outer-offset math costs
      // registers (measured on H200: bias add 71% -> 82% of copy bandwidth).
      constexpr int UNROLL = std::max(1, unroll_for<N * max_size<Tout, Tin...>()>() / 2);
      const int64_t inner = L.shape[L.rank - 1];
      uint32_t mask = 0;
      bool vec_ok = inner % N == 0;
      const void* ptrs[NIN + 1] = {L.out, L.in[I]...};
      const size_t align[NIN + 1] = {alignof(Pack<Tout, N>), alignof(Pack<Tin, N>)...};
      const size_t esize[NIN + 1] = {sizeof(Tout), sizeof(Tin)...};
      for (int a = 0; a < NIN + 1; ++a) {
        if (L.stride[a][L.rank - 1] == 0) continue;
        mask |= 1u << a;
        vec_ok = vec_ok && aligned_to(ptrs[a], align[a]);
        for (int d = 0; d < L.rank - 1; ++d)
          vec_ok = vec_ok && (L.stride[a][d] * int64_t(esize[a])) % int64_t(align[a]) == 0;
      }
      Indexer<NIN + 1> outer;
      fill(outer, L.rank - 1);
      if (vec_ok) {
        const uint32_t nchunks = uint32_t(L.numel / N);
        const unsigned vblocks = unsigned((nchunks + kThreads * UNROLL - 1) / (kThreads * UNROLL));
        ew_inner_kernel<N, UNROLL, NIN + 1, Fn, Tout, Tin...><<<vblocks, kThreads, 0, stream>>>(
            fn, outer, mask, FastDiv(uint32_t(inner / N)), nchunks, out, static_cast<const Tin*>(L.in[I])...);
      } else {
        const uint32_t n = uint32_t(L.numel);
        ew_inner_kernel<1, 4, NIN + 1, Fn, Tout, Tin...><<<unsigned((n + kThreads * 4 - 1) / (kThreads * 4)), kThreads, 0,
                                                          stream>>>(fn, outer, mask, FastDiv(uint32_t(inner)), n, out,
                                                                    static_cast<const Tin*>(L.in[I])...);
      }
      check_launch(name);
      return;
    }
    Indexer<NIN + 1> ix;
    fill(ix, L.rank);
    ew_strided_kernel<NIN + 1, Fn, Tout, Tin...><<<dim3(unsigned(blocks)), kThreads, 0, stream>>>(
        fn, ix, uint32_t(L.numel), out, static_cast<const Tin*>(L.in[I])...);
  }
  check_launch(name);
}

// Run `fn` over L's iteration space: out (Tout) from inputs (Tin...), in L.in order.
template <class Tout, class... Tin, class Fn>
void launch_map(const Fn& fn, const elementwise::EwLaunch& L, void* stream, const char* name) {
  if (L.numel == 0) return;
  launch_map_impl<Fn, Tout, Tin...>(fn, L, static_cast<cudaStream_t>(stream), name,
                                    std::index_sequence_for<Tin...>{});
}

}  // namespace baracuda::elementwise::kern
