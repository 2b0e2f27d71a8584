// Runtime dtype -> the row-loss launchers instantiated for it (row_<dtype>.cu).
#include <cuda_runtime.h>

#include "common/dtype_traits.cuh"
#include "loss/row_launch.h"

namespace baracuda::loss {
namespace detail {
template <class T> void row_launch_typed(const RowLaunch&, cudaStream_t);
}  // namespace detail

int64_t row_workspace_bytes(const RowLaunch& L) {
  const int64_t a = L.dtype == DType::Float64 ? 8 : 4;
  return 256 + (L.n * a + 255) / 256 * 256;
}

void row_launch(const RowLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  switch (L.dtype) {
    case DType::Float32: return detail::row_launch_typed<float>(L, st);
    case DType::Float64: return detail::row_launch_typed<double>(L, st);
    case DType::Float16: return detail::row_launch_typed<kernels::f16>(L, st);
    case DType::BFloat16: return detail::row_launch_typed<kernels::bf16>(L, st);
    default: break;
  }
  throw Unsupported(std::string("loss: no row kernel for ") + dtype_name(L.dtype));
}

}  // namespace baracuda::loss
