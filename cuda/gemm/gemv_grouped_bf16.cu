// Grouped (mixture-of-experts) decode GEMV kernels for bf16. The dispatch lives in
// gemv_grouped.cu.
#include "gemm/gemv_grouped.cuh"

namespace baracuda::gemm::detail {

void grouped_launch_bf16(const GemvGroupParams& q, const GemvCfg& c, int64_t grid, void* stream) {
  grouped_launch_t<kernels::bf16>(q, c, grid, stream);
}
int grouped_occupancy_bf16(const GemvCfg& c) { return grouped_occupancy_t<kernels::bf16>(c); }

}  // namespace baracuda::gemm::detail
