// The sm_90a flash kernels' entry points (attention_launch.h). The kernels are in flash_fwd_sm90.cuh
// and flash_bwd_sm90.cuh, instantiated one dtype per file (flash_{fwd,bwd}_{bf16,f16}_sm90.cu) so that
// they compile in parallel; without CUTLASS's CuTe (or a 90 architecture) the entry points cover nothing.
#include "attention/attention_launch.h"
#include "baracuda/errors.h"
#include "plan_util.h"

#if defined(BARACUDA_HAVE_CUTLASS)
#include "fa2/flash_common.cuh"

namespace baracuda::attention {
namespace flash {
template <class T> void forward_sm90(const Geometry& g, const Pointers& p, cudaStream_t stream);
extern template void forward_sm90<kernels::bf16>(const Geometry&, const Pointers&, cudaStream_t);
extern template void forward_sm90<kernels::f16>(const Geometry&, const Pointers&, cudaStream_t);
template <class T> void backward_sm90(const Geometry& g, const Pointers& p, cudaStream_t stream);
extern template void backward_sm90<kernels::bf16>(const Geometry&, const Pointers&, cudaStream_t);
extern template void backward_sm90<kernels::f16>(const Geometry&, const Pointers&, cudaStream_t);
}  // namespace flash

bool flash_sm90_supported(DType dtype, int64_t d, int64_t dv) {
  if ((dtype != DType::BFloat16 && dtype != DType::Float16) || d != dv) return false;
  if (!((d == 64 || d == 128 || d == 256) && flash::head_dim_built(int(d)))) return false;
  return current_device_cc() == 90;  // sm_90a code runs on sm_90 only
}

void flash_sm90_forward(const Geometry& g, const Pointers& p, void* stream) {
  if (g.batch == 0 || g.sq == 0 || g.hq == 0) return;
  auto st = static_cast<cudaStream_t>(stream);
  if (g.dtype == DType::BFloat16) flash::forward_sm90<kernels::bf16>(g, p, st);
  else flash::forward_sm90<kernels::f16>(g, p, st);
}

void flash_sm90_backward(const Geometry& g, const Pointers& p, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (g.dtype == DType::BFloat16) flash::backward_sm90<kernels::bf16>(g, p, st);
  else flash::backward_sm90<kernels::f16>(g, p, st);
}

}  // namespace baracuda::attention

#else  // !BARACUDA_HAVE_CUTLASS: no Hopper kernels in this build

namespace baracuda::attention {
namespace {
[[noreturn]] void no_sm90() {
  throw Unsupported("attention: this build has no sm_90a flash kernel (CUTLASS headers or a 90 architecture missing)");
}
}  // namespace
bool flash_sm90_supported(DType, int64_t, int64_t) { return false; }
void flash_sm90_forward(const Geometry&, const Pointers&, void*) { no_sm90(); }
void flash_sm90_backward(const Geometry&, const Pointers&, void*) { no_sm90(); }
}  // namespace baracuda::attention

#endif
