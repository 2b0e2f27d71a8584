// Grouped (mixture-of-experts) decode GEMV kernels for f32. The dispatch lives in
// gemv_grouped.cu.
#include "gemm/gemv_grouped.cuh"

namespace baracuda::gemm::detail {

void grouped_launch_f32(const GemvGroupParams& q, const GemvCfg& c, int64_t grid, void* stream) {
  grouped_launch_t<float>(q, c, grid, stream);
}
int grouped_occupancy_f32(const GemvCfg& c) { return grouped_occupancy_t<float>(c); }

}  // namespace baracuda::gemm::detail
