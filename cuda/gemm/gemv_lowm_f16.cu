// Low-M GEMV kernels for f16 (tensor-core path for aligned data, scalar fallback otherwise).
// The dispatch (configuration choice, variant names) lives in gemv_lowm_f32.cu.
#include "gemm/gemv_lowm.cuh"

namespace baracuda::gemm::detail {

void gemv_launch_f16(const GemvLowMArgs& a, const GemvCfg& c, void* stream) {
  gemv_launch_t<kernels::f16>(a, c, stream);
}
int gemv_occupancy_f16(const GemvCfg& c) { return gemv_occupancy_t<kernels::f16>(c); }

}  // namespace baracuda::gemm::detail
