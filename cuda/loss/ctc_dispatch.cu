// Runtime dtype -> the CTC loss launchers instantiated for it (ctc_<dtype>.cu).
#include <cuda_runtime.h>

#include <string>

#include "baracuda/errors.h"
#include "common/dtype_traits.cuh"
#include "loss/ctc_launch.h"

namespace baracuda::loss {
namespace detail {
template <class T> void ctc_launch_typed(const CtcLaunch&, cudaStream_t);
}  // namespace detail

bool ctc_has_kernel(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}

int64_t ctc_workspace_bytes(const CtcLaunch& L) {
  int64_t offs[4];
  return ctc_workspace_layout(L, offs);
}

void ctc_launch(const CtcLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  switch (L.dtype) {
    case DType::Float32: return detail::ctc_launch_typed<float>(L, st);
    case DType::Float64: return detail::ctc_launch_typed<double>(L, st);
    case DType::Float16: return detail::ctc_launch_typed<kernels::f16>(L, st);
    case DType::BFloat16: return detail::ctc_launch_typed<kernels::bf16>(L, st);
    default: break;
  }
  throw Unsupported(std::string("ctc_loss: no kernel for ") + dtype_name(L.dtype));
}

}  // namespace baracuda::loss
