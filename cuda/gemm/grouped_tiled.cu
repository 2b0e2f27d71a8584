// Tiled grouped (mixture-of-experts) GEMM for the prefill regime: many rows per expert, the group
// boundaries on the device. Same contract as grouped_gemv (gemm_launch.h) for bf16 / f16 with alpha 1
// and beta 0: out[r, n] = sum_k x[r, k] w[e, n, k] (+ bias[e, n]) for the rows r an expert owns.
//
// Work items are (expert, 128-column tile of w's rows, 128-row tile of the expert's rows), ordered
// so that the row tiles of one (expert, column tile) are adjacent: the blocks working on them at the
// same time share that 128 x K slice of w through L2. A persistent grid walks the items; each block
// maps its item to the expert with a warp scan over the offsets (as grouped_gemv does). A block of
// eight warps (2 x 4, 64 x 32 outputs each) runs mma.sync m16n8k16 over K in 32-wide steps, three
// cp.async stages deep; rows past an expert's end and columns past N are zero-filled in shared
// memory and never stored.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <mutex>

#include "common/async_copy.cuh"
#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/mma_sync.cuh"
#include "common/smem_opt_in.h"
#include "fa2/flash_common.cuh"
#include "gemm/gemm_launch.h"
#include "gemm/grouped_offsets.cuh"

namespace baracuda::gemm {
namespace {

constexpr int BM = 128, BN = 128, BK = 32, kStages = 3, kThreads = 256;
constexpr int LD = BK + 8;  // padded rows: ldmatrix's eight row addresses hit distinct banks
constexpr int kStageElems = (BM + BN) * LD;
constexpr int kSmemBytes = kStages * kStageElems * 2;

struct Item {
  int64_t lo, hi;  // the expert's rows
  int64_t e, row0, col0;
};

// Item `item` of the walk, or false past the last one. Warp 0 scans the experts 32 at a time
// (per-expert items: row tiles x column tiles), lane j of the group that holds the item names it.
__device__ bool find_item(const GroupedGemvArgs& a, int64_t item, int64_t col_tiles, Item* out) {
  __shared__ Item s;
  __shared__ int found;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int64_t base = 0;
    bool done = false;
    for (int64_t e0 = 0; e0 < a.E && !done; e0 += 32) {
      int64_t lo = 0, hi = 0, cnt = 0;
      if (e0 + lane < a.E) {
        const bool off64 = a.offsets_dtype == DType::Int64;
        lo = clamped_group_offset(a.offsets, off64, e0 + lane, a.T);
        hi = clamped_group_offset(a.offsets, off64, e0 + lane + 1, a.T);
        cnt = hi > lo ? (hi - lo + BM - 1) / BM * col_tiles : 0;
      }
      int64_t inc = cnt;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int64_t v = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += v;
      }
      const bool mine = cnt > 0 && item >= base + inc - cnt && item < base + inc;
      const unsigned owner = __ballot_sync(0xffffffffu, mine);
      if (mine) {
        const int64_t rel = item - (base + inc - cnt), row_tiles = (hi - lo + BM - 1) / BM;
        s.lo = lo, s.hi = hi, s.e = e0 + lane;
        s.col0 = (rel / row_tiles) * BN;
        s.row0 = lo + (rel % row_tiles) * BM;
      }
      done = owner != 0u;
      base += __shfl_sync(0xffffffffu, inc, 31);
    }
    if (lane == 0) found = done;
  }
  __syncthreads();
  *out = s;
  const bool f = found != 0;
  __syncthreads();  // s and found are rewritten by the next call
  return f;
}

template <class T>
__global__ void __launch_bounds__(kThreads, 2) grouped_tiled_kernel(const GroupedGemvArgs a, int64_t col_tiles) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3;  // 2 x 4 warps: rows wm * 64.., columns wn * 32..
  const int gq = lane >> 2, tq = lane & 3;
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const int64_t k_tiles = (a.K + BK - 1) / BK;

  for (int64_t item = blockIdx.x;; item += gridDim.x) {
    Item it;
    if (!find_item(a, item, col_tiles, &it)) return;
    const T* we = w + it.e * a.sw;

    // Tile kt of x's rows and w's rows into stage s: 4 16-byte chunks per row, 2 + 2 per thread.
    auto load_tile = [&](int64_t kt, int s) {
      T* As = smem + s * kStageElems;
      T* Bs = As + BM * LD;
      const int64_t k0 = kt * BK;
#pragma unroll
      for (int i = 0; i < (BM * BK / 8) / kThreads; ++i) {
        const int c = tid + i * kThreads, r = c >> 2, cc = c & 3;
        const int64_t k = k0 + cc * 8;
        const int64_t row = it.row0 + r, col = it.col0 + r;
        const bool in_a = row < it.hi && k < a.K, in_b = col < a.N && k < a.K;
        kernels::cp_async16_zfill(As + r * LD + cc * 8, x + (in_a ? row * a.ldx + k : 0), in_a);
        kernels::cp_async16_zfill(Bs + r * LD + cc * 8, we + (in_b ? col * a.ldw + k : 0), in_b);
      }
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < k_tiles) load_tile(s, s);
      kernels::cp_async_commit();
    }
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      kernels::cp_async_wait<kStages - 2>();
      __syncthreads();  // tile kt is in; every warp is done with the stage refilled below
      if (kt + kStages - 1 < k_tiles) load_tile(kt + kStages - 1, int((kt + kStages - 1) % kStages));
      kernels::cp_async_commit();
      const T* As = smem + int(kt % kStages) * kStageElems;
      const T* Bs = As + BM * LD;
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16) {
        unsigned af[4][4], bf[2][4];
#pragma unroll
        for (int i = 0; i < 4; ++i) attention::flash::load_a<LD>(af[i], As, wm * 64 + i * 16, kk);
#pragma unroll
        for (int j = 0; j < 2; ++j) attention::flash::load_b<LD>(bf[j], Bs, wn * 32 + j * 16, kk);
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            kernels::mma16816<T>(acc[i][j], af[i], bf[j >> 1][(j & 1) * 2], bf[j >> 1][(j & 1) * 2 + 1]);
      }
    }
    kernels::cp_async_wait<0>();
    __syncthreads();  // the next item's first loads reuse the stages

    // Epilogue: fragment (i, j) holds rows wm*64 + i*16 + gq (+ 8), columns wn*32 + j*8 + 2 tq (+ 1).
    T* out = static_cast<T*>(a.out);
    const T* bias = a.bias ? static_cast<const T*>(a.bias) + it.e * a.sbias : nullptr;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int64_t col = it.col0 + wn * 32 + j * 8 + 2 * tq + c;
        if (col >= a.N) continue;
        const float b = bias ? kernels::to_compute(bias[col]) : 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int64_t row = it.row0 + wm * 64 + i * 16 + gq + h * 8;
            if (row < it.hi) out[row * a.ldo + col] = kernels::from_compute<T>(acc[i][j][h * 2 + c] + b);
          }
      }
    }
  }
}

template <class T> void launch(const GroupedGemvArgs& a, void* stream) {
  constexpr auto kernel = grouped_tiled_kernel<T>;
  opt_in_dynamic_smem(kernel, kSmemBytes, "cudaFuncSetAttribute(grouped gemv)");
  const int64_t col_tiles = (a.N + BN - 1) / BN;
  // Items, at most: every expert with rows adds at most one partial row tile to T / BM.
  const int64_t items = col_tiles * ((a.T + BM - 1) / BM + std::min(a.E, a.T));
  // A persistent grid: the resident blocks of every SM (cached per device).
  static std::mutex mu;
  static int resident[64] = {};
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  int slots = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (dev < 64 && resident[dev] > 0) {
      slots = resident[dev];
    } else {
      int sms = 0, per_sm = 0;
      cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
      cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, kSmemBytes),
                 "cudaOccupancyMaxActiveBlocksPerMultiprocessor(grouped_tiled)");
      slots = std::max(1, sms * std::max(1, per_sm));
      if (dev < 64) resident[dev] = slots;
    }
  }
  const unsigned grid = unsigned(std::max<int64_t>(1, std::min<int64_t>(items, slots)));
  kernel<<<grid, kThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(a, col_tiles);
  check_launch("grouped_tiled_kernel");
}

}  // namespace

bool grouped_tiled_supported(const GroupedGemvArgs& a) {
  const bool half = a.dtype == DType::BFloat16 || a.dtype == DType::Float16;
  return half && (a.offsets_dtype == DType::Int32 || a.offsets_dtype == DType::Int64) && a.alpha == 1.0f &&
         a.beta == 0.0f && a.E >= 0 && a.N >= 0 && a.T >= 0 && a.K > 0 && a.K % 8 == 0 &&
         (a.T <= 1 || a.ldx % 8 == 0) && (a.N <= 1 || a.ldw % 8 == 0) && (a.E <= 1 || a.sw % 8 == 0) &&
         aligned16(a.x) && aligned16(a.w);
}

void grouped_tiled(const GroupedGemvArgs& a, void* stream) {
  if (a.E == 0 || a.N == 0 || a.T == 0) return;
  if (a.dtype == DType::BFloat16) launch<kernels::bf16>(a, stream);
  else launch<kernels::f16>(a, stream);
}

}  // namespace baracuda::gemm
