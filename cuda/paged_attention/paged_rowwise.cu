// Decode attention over a paged cache on CUDA cores: the path for f32, for head dims the
// tensor-core kernel (paged_decode.cu) is not built for (any D up to 256), and for fp8 caches. One block of four warps
// per (request, query token, q head); each warp takes every fourth visible key: a warp-wide dot
// product, the score rule, an online softmax in f32 with each lane holding D / 32 output columns;
// the warps' states merge through shared memory. No splits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "paged_attention/paged_attention_launch.h"

namespace baracuda::paged_attention {

namespace {

constexpr int kWarps = 4;
constexpr int kCols = kMaxRowwiseHeadDim / 32;  // output columns per lane
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// T: q and out; C: the caches (T, or fp8 with p.k_scale / p.v_scale folded into the score and the output).
template <class T, class C>
__global__ void __launch_bounds__(kWarps * 32) paged_rowwise_kernel(const Geometry g, const Pointers p) {
  __shared__ float qs[kMaxRowwiseHeadDim];
  __shared__ float Ms[kWarps], Ls[kWarps];
  __shared__ float Os[kWarps][kMaxRowwiseHeadDim];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, D = g.d;
  const int64_t b = blockIdx.y, i = blockIdx.x / g.hq, h = blockIdx.x % g.hq, hk = h / g.group;
  const int64_t seq_len =
      min(max(int64_t(p.seq_lens[b * g.seq_lens_stride]), int64_t(0)), g.max_pages * g.page_size);
  const int64_t pos = seq_len - g.sq + i;
  const int64_t lo = g.window_left >= 0 ? max(int64_t(0), pos - g.window_left) : 0;
  const int64_t hi = g.window_right >= 0 ? min(seq_len, pos + g.window_right + 1) : seq_len;

  const T* q = static_cast<const T*>(p.q) + b * g.q_batch + i * g.q_token + h * g.q_head;
  for (int d = threadIdx.x; d < D; d += blockDim.x) qs[d] = kernels::to_compute(q[d]);
  __syncthreads();

  const float k_scale = p.k_scale ? p.k_scale[hk * p.scale_stride] : 1.f;
  const float v_scale = p.v_scale ? p.v_scale[hk * p.scale_stride] : 1.f;
  const float scale_log2 = g.scale * k_scale * kLog2e;
  const bool softcap = g.softcap > 0.f;
  const float cap_scale = softcap ? g.scale * k_scale / g.softcap : 0.f, cap_log2 = g.softcap * kLog2e;
  const float slope_log2 = g.alibi ? p.alibi_slopes[h] * kLog2e : 0.f;
  const C* kc = static_cast<const C*>(p.k_cache) + hk * g.k_head;
  const C* vc = static_cast<const C*>(p.v_cache) + hk * g.v_head;

  float m = -INFINITY, l = 0.f, acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.f;
  for (int64_t j = lo + w; j < hi; j += kWarps) {
    const int64_t page = p.block_table[b * g.table_row + (j / g.page_size) * g.table_col];
    if (page < 0 || page >= g.pages) continue;  // a hidden page: its keys are not read
    const int64_t slot = j % g.page_size;
    const C* kr = kc + page * g.k_page + slot * g.k_slot;
    const C* vr = vc + page * g.v_page + slot * g.v_slot;
    float dot = 0.f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int d = lane + 32 * c;
      if (d < D) dot += qs[d] * kernels::to_compute(kr[d]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    float x = softcap ? cap_log2 * tanhf(dot * cap_scale) : dot * scale_log2;
    if (g.alibi) x -= slope_log2 * fabsf(float(pos - j));
    const float mn = fmaxf(m, x);
    const float corr = exp2f(m - mn), pe = exp2f(x - mn);  // m = -inf the first time: corr = 0
    l = l * corr + pe;
    m = mn;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int d = lane + 32 * c;
      acc[c] = acc[c] * corr + (d < D ? pe * kernels::to_compute(vr[d]) : 0.f);
    }
  }
  if (lane == 0) {
    Ms[w] = m;
    Ls[w] = l;
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const int d = lane + 32 * c;
    if (d < D) Os[w][d] = acc[c];
  }
  __syncthreads();

  float M = g.sinks ? p.sinks[h] * kLog2e : -INFINITY;
  for (int v = 0; v < kWarps; ++v) M = fmaxf(M, Ms[v]);
  float L = 0.f;
  if (M != -INFINITY) {
    for (int v = 0; v < kWarps; ++v)
      if (Ms[v] != -INFINITY) L += Ls[v] * exp2f(Ms[v] - M);
    if (g.sinks) L += exp2f(p.sinks[h] * kLog2e - M);
  }
  T* orow = static_cast<T*>(p.out) + b * g.out_batch + i * g.out_token + h * g.out_head;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.f;
    if (L > 0.f)
      for (int v = 0; v < kWarps; ++v)
        if (Ms[v] != -INFINITY) o += Os[v][d] * exp2f(Ms[v] - M);
    orow[d] = kernels::from_compute<T>(L > 0.f ? o * v_scale / L : 0.f);
  }
  if (threadIdx.x == 0 && p.lse != nullptr)
    p.lse[(b * g.hq + h) * g.sq + i] = L > 0.f ? (M + log2f(L)) * kLn2 : -INFINITY;
}

}  // namespace

void decode_rowwise(const Geometry& g, const Pointers& p, void* stream) {
  const dim3 grid(unsigned(g.sq * g.hq), unsigned(g.batch));
  auto s = static_cast<cudaStream_t>(stream);
  auto go = [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (g.cache_dtype) {
      case DType::Float8E4M3: paged_rowwise_kernel<T, kernels::e4m3><<<grid, kWarps * 32, 0, s>>>(g, p); break;
      case DType::Float8E5M2: paged_rowwise_kernel<T, kernels::e5m2><<<grid, kWarps * 32, 0, s>>>(g, p); break;
      default: paged_rowwise_kernel<T, T><<<grid, kWarps * 32, 0, s>>>(g, p); break;
    }
  };
  switch (g.dtype) {
    case DType::Float32: go(kernels::TypeTag<float>{}); break;
    case DType::BFloat16: go(kernels::TypeTag<__nv_bfloat16>{}); break;
    default: go(kernels::TypeTag<__half>{}); break;
  }
  cuda_check(cudaGetLastError(), "paged attention rowwise launch");
}

}  // namespace baracuda::paged_attention
