// The 64-row instantiations of the paged tensor-core kernel (paged_mma.cuh) for f16 queries: chunked
// prefills and other calls with many query rows per kv head, each key read once per 64 rows.
#include "paged_attention/paged_mma.cuh"

namespace baracuda::paged_attention {

void launch_wide_f16(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  launch_main<__half, true>(g, p, stream);
}

int resident_wide_f16(int d) { return resident_blocks<__half, true>(d); }

}  // namespace baracuda::paged_attention
