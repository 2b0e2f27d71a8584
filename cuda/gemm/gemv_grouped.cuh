// Grouped (mixture-of-experts) decode GEMV: the kernels of gemv_lowm.cuh, run over a list of
// work items (expert, tile of w rows, chunk of that expert's rows) that every block derives
// on the device from the offsets array. One launch serves every expert.
//
// Work items. Expert e owns rows [lo_e, hi_e) (offsets clamped to [0, T]); with the row tile
// CM (8 or 16 for the mma kernel, the M bucket for the fma kernel) it has
// ch_e = ceil((hi_e - lo_e) / CM) row chunks and ch_e * ntiles items, ntiles = tiles of w
// rows per expert. Items are numbered densely, expert-major, then tile, then chunk (the
// chunks of one tile are adjacent, so they run at about the same time on different SMs and
// the repeated reads of that tile of w hit L2). Block b takes items b, b + grid, b + 2 grid,
// ...: an expert with no rows owns no items, so nothing reads its weights, and the blocks
// stay balanced however the rows fall.
//
// Mapping an item to its expert: every warp walks the experts 32 at a time (one per lane),
// loads their offsets, takes an inclusive warp scan of ch_e and, for each of its items in
// that group, finds the owning lane with one ballot (the lanes whose cumulative range ends
// at or before the item form a prefix). All warps of a block compute the same sequence, so
// the block stays in step through the tile's __syncthreads without sharing anything.
// Cost: ceil(E / 32) steps of two cached loads and a scan per block, plus a ballot and a few
// shuffles per item.
#pragma once
#include "gemm/gemv_lowm.cuh"
#include "gemm/grouped_offsets.cuh"

namespace baracuda::gemm::detail {

struct GemvGroupParams {
  GemvParams p;          // x, w, out, bias: row 0 / expert 0; ntiles: tiles per expert; M unused
  const void* offsets;   // [E + 1], int32 or int64
  int64_t E, T;
  int64_t sw, sbias;     // expert strides of w and bias (elements)
  int off64;             // offsets are int64
};

// Per-dtype entry points (one TU each). `grid`: blocks to launch (>= 1).
void grouped_launch_bf16(const GemvGroupParams& q, const GemvCfg& c, int64_t grid, void* stream);
void grouped_launch_f16(const GemvGroupParams& q, const GemvCfg& c, int64_t grid, void* stream);
void grouped_launch_f32(const GemvGroupParams& q, const GemvCfg& c, int64_t grid, void* stream);
int grouped_occupancy_bf16(const GemvCfg& c);
int grouped_occupancy_f16(const GemvCfg& c);
int grouped_occupancy_f32(const GemvCfg& c);

// offsets[i] clamped to [0, T].
__device__ __forceinline__ int64_t group_offset(const GemvGroupParams& q, int64_t i) {
  return clamped_group_offset(q.offsets, q.off64, i, q.T);
}

// Calls f(expert, tile, first row, rows) for each of this block's work items, in order.
// rows is in 1..CM. Must be called by every thread of the block (warp-collective inside).
template <class F>
__device__ __forceinline__ void for_each_group_item(const GemvGroupParams& q, int CM, F&& f) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  const int64_t nt = q.p.ntiles;
  int64_t base = 0;             // first item of the current group of 32 experts
  int64_t next = blockIdx.x;    // this block's next item
  for (int64_t e0 = 0; e0 < q.E; e0 += 32) {
    int64_t cum = 0;  // row chunks of this lane's expert, then their inclusive scan
    if (e0 + lane < q.E) {
      const int64_t lo = group_offset(q, e0 + lane), hi = group_offset(q, e0 + lane + 1);
      cum = hi > lo ? (hi - lo + CM - 1) / CM : 0;
    }
#pragma unroll
    for (int s = 1; s < 32; s <<= 1) {
      const int64_t v = __shfl_up_sync(kAll, cum, s);
      if (lane >= s) cum += v;
    }
    const int64_t end = base + __shfl_sync(kAll, cum, 31) * nt;
    while (next < end) {
      const int64_t rel = next - base;
      // Lanes whose items all lie before `rel`: a prefix (cum is non-decreasing); the next
      // lane, j, owns the item (and has chunks). Only `cum` stays live across the tiles: the
      // owner's rows are re-read from the offsets (cached) to spare registers.
      const int j = __popc(__ballot_sync(kAll, rel >= cum * nt));
      const int64_t cj = __shfl_sync(kAll, cum, j);
      const int64_t cp = __shfl_sync(kAll, cum, j > 0 ? j - 1 : 0);
      const int64_t chj = j > 0 ? cj - cp : cj;
      const int64_t loj = group_offset(q, e0 + j);
      const int64_t rowsj = group_offset(q, e0 + j + 1) - loj;
      const int64_t local = rel - (cj - chj) * nt;  // item inside expert e0 + j
      int64_t tile, chunk;
      if (chj == 1) {  // the decode case: skip the 64-bit division
        tile = local;
        chunk = 0;
      } else {
        tile = local / chj;
        chunk = local - tile * chj;
      }
      const int64_t r0 = chunk * CM, left = rowsj - r0;
      f(e0 + j, tile, loj + r0, static_cast<int>(left < CM ? left : CM));
      next += gridDim.x;
    }
    base = end;
  }
}

template <class T>
__device__ __forceinline__ const void* group_bias(const GemvGroupParams& q, int64_t e) {
  if (q.p.bias == nullptr) return nullptr;
  return q.p.bias_f32 ? static_cast<const void*>(static_cast<const float*>(q.p.bias) + e * q.sbias)
                      : static_cast<const void*>(static_cast<const T*>(q.p.bias) + e * q.sbias);
}

template <class T, bool M16, int RN>
__global__ void __launch_bounds__(32 * kGemvMaxWarps, 1)
gemv_mma_grouped_kernel(const GemvGroupParams q) {
  constexpr int CH = 32, U = mma_unroll(RN), CM = M16 ? 16 : 8;
  extern __shared__ float gemv_red[];  // [kw][RN * 4][32]
  const GemvParams& p = q.p;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);
  T* out = static_cast<T*>(p.out);

  int64_t kb, len;
  warp_k_range(p.K, CH, warp, kw, kb, len);
  const int64_t niter = len > 0 ? len / (CH * U) : 0;
  const int rem = len > 0 ? static_cast<int>(len - niter * (CH * U)) : 0;

  for_each_group_item(q, CM, [&](int64_t e, int64_t tile, int64_t row0, int M) {
    const T* xt = x + row0 * p.ldx + kb + 8 * t;
    const T* xlo = xt + int64_t(g < M ? g : M - 1) * p.ldx;
    const T* xhi = xt + int64_t(g + 8 < M ? g + 8 : M - 1) * p.ldx;
    gemv_mma_tile<T, M16, RN>(p, w + e * q.sw, xlo, xhi, kb, niter, rem, tile * (8 * RN), M,
                              out + row0 * p.ldo, group_bias<T>(q, e), gemv_red);
  });
}

template <class T, int MT, bool VEC>
__global__ void __launch_bounds__(32 * kGemvMaxWarps, 1)
gemv_fma_grouped_kernel(const GemvGroupParams q) {
  constexpr int R = fma_rows(MT, VEC), U = fma_unroll(MT, VEC);
  constexpr int V = VEC ? 16 / int(sizeof(T)) : 1;
  constexpr int CH = 32 * V;
  extern __shared__ float gemv_red[];  // [kw][MT * R]
  const GemvParams& p = q.p;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = blockDim.x >> 5;
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);
  T* out = static_cast<T*>(p.out);

  int64_t kb, len;
  warp_k_range(p.K, CH, warp, kw, kb, len);
  const int64_t niter = len > 0 ? len / (CH * U) : 0;
  const int rem = len > 0 ? static_cast<int>(len - niter * (CH * U)) : 0;

  for_each_group_item(q, MT, [&](int64_t e, int64_t tile, int64_t row0, int M) {
    gemv_fma_tile<T, MT, VEC>(p, w + e * q.sw, x + row0 * p.ldx + kb + V * lane, kb, niter, rem,
                              tile * R, M, out + row0 * p.ldo, group_bias<T>(q, e), gemv_red);
  });
}

// ---------------------------------------------------------------------------------------
// Host side, instantiated once per dtype TU.
using GemvGroupKernel = void (*)(GemvGroupParams);

template <class T> GemvGroupKernel grouped_kernel_for(const GemvCfg& c) {
  if constexpr (kernels::is_half_v<T>) {
    if (c.path == GemvPath::Mma) {
      if (c.mt > 8) {
        if (c.rn == 1) return gemv_mma_grouped_kernel<T, true, 1>;
        if (c.rn == 2) return gemv_mma_grouped_kernel<T, true, 2>;
        return gemv_mma_grouped_kernel<T, true, 4>;
      }
      if (c.rn == 1) return gemv_mma_grouped_kernel<T, false, 1>;
      if (c.rn == 2) return gemv_mma_grouped_kernel<T, false, 2>;
      return gemv_mma_grouped_kernel<T, false, 4>;
    }
    switch (c.mt) {  // halves take the fma kernel only for unaligned data
      case 1: return gemv_fma_grouped_kernel<T, 1, false>;
      case 2: return gemv_fma_grouped_kernel<T, 2, false>;
      case 4: return gemv_fma_grouped_kernel<T, 4, false>;
      case 8: return gemv_fma_grouped_kernel<T, 8, false>;
      default: return gemv_fma_grouped_kernel<T, 16, false>;
    }
  } else {
    if (c.vec) {
      switch (c.mt) {
        case 1: return gemv_fma_grouped_kernel<T, 1, true>;
        case 2: return gemv_fma_grouped_kernel<T, 2, true>;
        case 4: return gemv_fma_grouped_kernel<T, 4, true>;
        case 8: return gemv_fma_grouped_kernel<T, 8, true>;
        default: return gemv_fma_grouped_kernel<T, 16, true>;
      }
    }
    switch (c.mt) {
      case 1: return gemv_fma_grouped_kernel<T, 1, false>;
      case 2: return gemv_fma_grouped_kernel<T, 2, false>;
      case 4: return gemv_fma_grouped_kernel<T, 4, false>;
      case 8: return gemv_fma_grouped_kernel<T, 8, false>;
      default: return gemv_fma_grouped_kernel<T, 16, false>;
    }
  }
}

template <class T> int grouped_occupancy_t(const GemvCfg& c) {
  int blocks = 0;
  const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, grouped_kernel_for<T>(c), 32 * c.kw, gemv_smem_bytes(c));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return blocks;
}

template <class T>
void grouped_launch_t(const GemvGroupParams& q, const GemvCfg& c, int64_t grid, void* stream) {
  const int64_t max_grid = 0x7fffffff;
  const unsigned g = static_cast<unsigned>(grid < 1 ? 1 : (grid < max_grid ? grid : max_grid));
  grouped_kernel_for<T>(c)<<<g, 32 * c.kw, gemv_smem_bytes(c), static_cast<cudaStream_t>(stream)>>>(q);
  check_launch(c.path == GemvPath::Mma ? "gemv_mma_grouped_kernel" : "gemv_fma_grouped_kernel");
}

}  // namespace baracuda::gemm::detail
