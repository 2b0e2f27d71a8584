// The 64-row instantiations of the paged tensor-core kernel (paged_mma.cuh): chunked prefills and
// other calls with many query rows per kv head, each key read once per 64 rows.
#include "paged_attention/paged_mma.cuh"

namespace baracuda::paged_attention {

void launch_wide(const Geometry& g, const Pointers& p, cudaStream_t stream) { launch_main<true>(g, p, stream); }

int resident_wide(DType dtype, int d) { return resident_blocks<true>(dtype, d); }

}  // namespace baracuda::paged_attention
