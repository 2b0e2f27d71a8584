// Map-reduce: sum a map over the dimensions where the output's stride is 0. This is the
// gradient of a broadcast operand (a bias, a (N,1) column): the per-element gradient is
// computed in the accumulation type and summed in registers, never written out.
// Fixed summation order everywhere: deterministic and bit-stable.
//   columns: the output's innermost dim is kept (bias-style): threads walk adjacent outputs
//            (coalesced), 8 row slices per block, and `splits` blocks along the reduced
//            rows write partial sums to the workspace, summed in order by a second kernel.
//   rows:    the reduced dims are innermost: a warp (or a block, for long rows) per output.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cuda/std/tuple>
#include <utility>

#include "common/cuda_check.h"
#include "elementwise/elementwise_launch.h"
#include "elementwise/launch.cuh"
#include "elementwise/misc_ops.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

template <int NARGS>
struct ReduceIndex {  // dims innermost first; arg 0 is the output
  int nkept = 0, nred = 0;
  int64_t kept_size[kMaxRank], red_size[kMaxRank];
  int64_t kept_stride[kMaxRank][NARGS], red_stride[kMaxRank][NARGS];
  int64_t K = 1, R = 1;
  __device__ __forceinline__ void kept(int64_t o, int64_t (&off)[NARGS]) const {
#pragma unroll
    for (int a = 0; a < NARGS; ++a) off[a] = 0;
    for (int d = 0; d < nkept; ++d) {
      const int64_t q = o / kept_size[d], i = o - q * kept_size[d];
#pragma unroll
      for (int a = 0; a < NARGS; ++a) off[a] += i * kept_stride[d][a];
      o = q;
    }
  }
  __device__ __forceinline__ void reduced(int64_t r, const int64_t (&base)[NARGS], int64_t (&off)[NARGS]) const {
#pragma unroll
    for (int a = 0; a < NARGS; ++a) off[a] = base[a];
    if (nred == 1) {
#pragma unroll
      for (int a = 1; a < NARGS; ++a) off[a] += r * red_stride[0][a];
      return;
    }
    for (int d = 0; d < nred; ++d) {
      const int64_t q = r / red_size[d], i = r - q * red_size[d];
#pragma unroll
      for (int a = 1; a < NARGS; ++a) off[a] += i * red_stride[d][a];
      r = q;
    }
  }
};

template <class A, class Fn, class... Tin, size_t... I>
__device__ __forceinline__ A map_at(const Fn& fn, const int64_t* off, std::index_sequence<I...>, const Tin*... in) {
  cuda::std::tuple<Pack<Tin, 1>...> x;
  ((cuda::std::get<I>(x).v[0] = in[off[I + 1]]), ...);
  Pack<A, 1> y;
  fn.template map<1>(y.v, cuda::std::get<I>(x).v...);
  return y.v[0];
}

// Columns with V adjacent outputs per thread: 16-byte loads of every operand that is
// contiguous along the innermost kept dim (a broadcast one is read once per chunk).
// V = 1 is the plain columns kernel, for any strides.
template <int V, int NARGS, class A, class Fn, class Tout, class... Tin, size_t... I>
__device__ __forceinline__ void columns_vec_step(const Fn& fn, const int64_t (&off)[NARGS], uint32_t vec_mask,
                                                 A (&acc)[V], std::index_sequence<I...>, const Tin*... in) {
  cuda::std::tuple<Pack<Tin, V>...> x;
  (load_chunk<V>(cuda::std::get<I>(x), in + off[I + 1], 0, !((vec_mask >> (I + 1)) & 1u)), ...);
  A y[V];
  fn.template map<V>(y, cuda::std::get<I>(x).v...);
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] += y[v];
}

template <int V, int NARGS, class A, class Fn, class Tout, class... Tin>
__global__ void __launch_bounds__(256)
map_reduce_columns_kernel(Fn fn, ReduceIndex<NARGS> ix, uint32_t vec_mask, int64_t rows_per_split, A* partial,
                              Tout* out, const Tin*... in) {
  __shared__ A part[8][32 * V + 1];
  const int64_t o = (int64_t(blockIdx.x) * 32 + threadIdx.x) * V;  // first of this thread's V outputs
  A acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = A(0);
  int64_t base[NARGS];
  if (o < ix.K) {
    ix.kept(o, base);
    const int64_t r0 = int64_t(blockIdx.y) * rows_per_split;
    const int64_t r1 = std::min(ix.R, r0 + rows_per_split);
#pragma unroll 2
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
      int64_t off[NARGS];
      ix.reduced(r, base, off);
      columns_vec_step<V, NARGS, A, Fn, Tout, Tin...>(fn, off, vec_mask, acc, std::index_sequence_for<Tin...>{}, in...);
    }
  }
#pragma unroll
  for (int v = 0; v < V; ++v) part[threadIdx.y][threadIdx.x * V + v] = acc[v];
  __syncthreads();
  if (threadIdx.y == 0 && o < ix.K) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
      A sum = acc[v];
      for (int s = 1; s < 8; ++s) sum += part[s][threadIdx.x * V + v];
      if (gridDim.y == 1) out[base[0] + v * ix.kept_stride[0][0]] = convert<A, Tout>(sum, true);
      else partial[int64_t(blockIdx.y) * ix.K + o + v] = sum;
    }
  }
}

template <int NARGS, class A, class Tout>
__global__ void map_reduce_finish_kernel(ReduceIndex<NARGS> ix, int splits, const A* partial, Tout* out) {
  const int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= ix.K) return;
  A acc = A(0);
  for (int s = 0; s < splits; ++s) acc += partial[int64_t(s) * ix.K + o];
  int64_t base[NARGS];
  ix.kept(o, base);
  out[base[0]] = convert<A, Tout>(acc, true);
}

template <int THREADS, int NARGS, class A, class Fn, class Tout, class... Tin>
__global__ void __launch_bounds__(256)
map_reduce_rows_kernel(Fn fn, ReduceIndex<NARGS> ix, Tout* out, const Tin*... in) {
  constexpr int kPerBlock = 256 / THREADS;
  __shared__ A part[256 / 32];
  const int lane = threadIdx.x % THREADS;
  const int64_t o = int64_t(blockIdx.x) * kPerBlock + threadIdx.x / THREADS;
  A acc = A(0);
  int64_t base[NARGS];
  if (o < ix.K) {
    ix.kept(o, base);
#pragma unroll 4
    for (int64_t r = lane; r < ix.R; r += THREADS) {
      int64_t off[NARGS];
      ix.reduced(r, base, off);
      acc += map_at<A, Fn, Tin...>(fn, off, std::index_sequence_for<Tin...>{}, in...);
    }
  }
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if constexpr (THREADS > 32) {
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      acc = A(0);
      for (int w = 0; w < THREADS / 32; ++w) acc += part[w];
    }
  }
  if (lane == 0 && o < ix.K) out[base[0]] = convert<A, Tout>(acc, true);
}

// Sum fn over L's dims whose output stride is 0 (L.map_reduce), into out (Tout), with the
// per-element map in A. L.splits > 1 uses L.workspace for splits x K partial sums.
template <class A, class Tout, class... Tin, class Fn, size_t... I>
void launch_map_reduce_impl(const Fn& fn, const elementwise::EwLaunch& L, cudaStream_t stream, std::index_sequence<I...>) {
  constexpr int NARGS = sizeof...(Tin) + 1;
  ReduceIndex<NARGS> ix;
  for (int d = L.rank - 1; d >= 0; --d) {
    if (L.stride[0][d] == 0) {
      const int k = ix.nred++;
      ix.red_size[k] = L.shape[d];
      for (int a = 0; a < NARGS; ++a) ix.red_stride[k][a] = L.stride[a][d];
      ix.R *= L.shape[d];
    } else {
      const int k = ix.nkept++;
      ix.kept_size[k] = L.shape[d];
      for (int a = 0; a < NARGS; ++a) ix.kept_stride[k][a] = L.stride[a][d];
      ix.K *= L.shape[d];
    }
  }
  Tout* out = static_cast<Tout*>(L.out);
  if (L.reduce_columns) {
    const int64_t rows = (ix.R + L.splits - 1) / L.splits;
    // Vectors along the innermost kept dim when it divides and the vector operands align.
    constexpr int V = std::max(1, std::min(8, 16 / int(std::min({sizeof(Tin)...}))));
    bool vec_ok = V > 1 && ix.kept_size[0] % V == 0;
    uint32_t vec_mask = 0;
    const void* ptrs[NARGS - 1] = {L.in[I]...};
    const size_t align[NARGS - 1] = {alignof(Pack<Tin, V>)...};
    const size_t esize[NARGS - 1] = {sizeof(Tin)...};
    for (int a = 1; a < NARGS; ++a) {
      if (ix.kept_stride[0][a] == 0) continue;
      vec_ok = vec_ok && ix.kept_stride[0][a] == 1;
      vec_mask |= 1u << a;
      vec_ok = vec_ok && aligned_to(ptrs[a - 1], align[a - 1]);
      for (int d = 1; d < ix.nkept; ++d)
        vec_ok = vec_ok && (ix.kept_stride[d][a] * int64_t(esize[a - 1])) % int64_t(align[a - 1]) == 0;
      for (int d = 0; d < ix.nred; ++d)
        vec_ok = vec_ok && (ix.red_stride[d][a] * int64_t(esize[a - 1])) % int64_t(align[a - 1]) == 0;
    }
    if (vec_ok) {
      map_reduce_columns_kernel<V, NARGS, A, Fn, Tout, Tin...>
          <<<dim3(unsigned((ix.K / V + 31) / 32), unsigned(L.splits)), dim3(32, 8), 0, stream>>>(
              fn, ix, vec_mask, rows, static_cast<A*>(L.workspace), out, static_cast<const Tin*>(L.in[I])...);
    } else {
      map_reduce_columns_kernel<1, NARGS, A, Fn, Tout, Tin...>
          <<<dim3(unsigned((ix.K + 31) / 32), unsigned(L.splits)), dim3(32, 8), 0, stream>>>(
              fn, ix, 0u, rows, static_cast<A*>(L.workspace), out, static_cast<const Tin*>(L.in[I])...);
    }
    check_launch("map_reduce_columns");
    if (L.splits > 1) {
      map_reduce_finish_kernel<NARGS, A, Tout><<<unsigned((ix.K + 255) / 256), 256, 0, stream>>>(
          ix, L.splits, static_cast<const A*>(L.workspace), out);
      check_launch("map_reduce_finish");
    }
  } else if (ix.R >= 4096) {
    map_reduce_rows_kernel<256, NARGS, A, Fn, Tout, Tin...><<<unsigned(ix.K), 256, 0, stream>>>(
        fn, ix, out, static_cast<const Tin*>(L.in[I])...);
    check_launch("map_reduce_rows");
  } else {
    map_reduce_rows_kernel<32, NARGS, A, Fn, Tout, Tin...><<<unsigned((ix.K + 7) / 8), 256, 0, stream>>>(
        fn, ix, out, static_cast<const Tin*>(L.in[I])...);
    check_launch("map_reduce_rows");
  }
}

template <class A, class Tout, class... Tin, class Fn>
void launch_map_reduce(const Fn& fn, const elementwise::EwLaunch& L, void* stream) {
  if (L.numel == 0) return;
  launch_map_reduce_impl<A, Tout, Tin...>(fn, L, static_cast<cudaStream_t>(stream), std::index_sequence_for<Tin...>{});
}

}  // namespace baracuda::elementwise::kern
