// The 16-row (decode) kernels, the split merge and the entry point; the kernel itself is
// paged_mma.cuh, its 64-row (prefill) instantiations paged_prefill_{bf16,f16}.cu.
#include "paged_attention/paged_mma.cuh"

namespace baracuda::paged_attention {

namespace {

// One block per (request, query token, q head): the splits' partials weighted by exp2(lse_s),
// the sink added to the denominator.
template <class T> __global__ void merge_kernel(const Geometry g, const Pointers p) {
  const int64_t row = blockIdx.x;  // (b * sq + i) * hq + h
  const int64_t h = row % g.hq, i = (row / g.hq) % g.sq, b = row / (g.hq * g.sq);
  const int64_t rows_total = g.batch * g.sq * g.hq;
  float M = g.sinks ? p.sinks[h] * kLog2e : -INFINITY;
  for (int s = 0; s < g.splits; ++s) M = fmaxf(M, p.partial_lse[s * rows_total + row]);
  float L = 0.f;
  if (M != -INFINITY) {
    for (int s = 0; s < g.splits; ++s) {
      const float ls = p.partial_lse[s * rows_total + row];
      if (ls != -INFINITY) L += exp2f(ls - M);
    }
    if (g.sinks) L += exp2f(p.sinks[h] * kLog2e - M);
  }
  T* orow = static_cast<T*>(p.out) + b * g.out_batch + i * g.out_token + h * g.out_head;
  for (int d = threadIdx.x; d < g.d; d += blockDim.x) {
    float acc = 0.f;
    if (L > 0.f)
      for (int s = 0; s < g.splits; ++s) {
        const float ls = p.partial_lse[s * rows_total + row];
        if (ls != -INFINITY) acc += exp2f(ls - M) * p.partial_out[(s * rows_total + row) * g.d + d];
      }
    orow[d] = kernels::from_compute<T>(L > 0.f ? acc / L : 0.f);
  }
  if (threadIdx.x == 0 && p.lse != nullptr)
    p.lse[(b * g.hq + h) * g.sq + i] = L > 0.f ? (M + log2f(L)) * kLn2 : -INFINITY;
}

}  // namespace

int resident_blocks_per_sm(DType dtype, int d, int rows_per_block) {
  const bool bf16 = dtype == DType::BFloat16;
  if (rows_per_block == kWideRowsPerBlock) return bf16 ? resident_wide_bf16(d) : resident_wide_f16(d);
  return bf16 ? resident_blocks<__nv_bfloat16, false>(d) : resident_blocks<__half, false>(d);
}

void decode(const Geometry& g, const Pointers& p, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const bool bf16 = g.dtype == DType::BFloat16;
  if (g.rows_per_block == kWideRowsPerBlock) bf16 ? launch_wide_bf16(g, p, s) : launch_wide_f16(g, p, s);
  else if (bf16) launch_main<__nv_bfloat16, false>(g, p, s);
  else launch_main<__half, false>(g, p, s);
  if (g.splits > 1) {
    const unsigned threads = g.d >= 128 ? 128 : 64;
    if (g.dtype == DType::BFloat16) merge_kernel<__nv_bfloat16><<<unsigned(g.batch * g.sq * g.hq), threads, 0, s>>>(g, p);
    else merge_kernel<__half><<<unsigned(g.batch * g.sq * g.hq), threads, 0, s>>>(g, p);
    cuda_check(cudaGetLastError(), "paged attention merge launch");
  }
}

}  // namespace baracuda::paged_attention
