// The 64-row instantiations of the paged tensor-core kernel (paged_mma.cuh) for bf16 queries: chunked
// prefills and other calls with many query rows per kv head, each key read once per 64 rows.
#include "paged_attention/paged_mma.cuh"

namespace baracuda::paged_attention {

void launch_wide_bf16(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  launch_main<__nv_bfloat16, true>(g, p, stream);
}

int resident_wide_bf16(int d) { return resident_blocks<__nv_bfloat16, true>(d); }

}  // namespace baracuda::paged_attention
