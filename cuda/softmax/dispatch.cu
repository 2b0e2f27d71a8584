// Runtime dtype -> the softmax launcher instantiated for it (softmax_<dtype>.cu).
#include <cuda_runtime.h>

#include "common/dtype_traits.cuh"
#include "softmax/softmax_launch.h"

namespace baracuda::softmax {
namespace detail {
template <class T> void launch_typed(const SmLaunch&, cudaStream_t);
}  // namespace detail

const char* path_name(SmPath p) {
  switch (p) {
    case SmPath::RowsWarp: return "rows_warp";
    case SmPath::RowsBlock: return "rows_block";
    case SmPath::RowsCluster: return "rows_cluster";
    case SmPath::RowsOnline: return "rows_online";
    case SmPath::RowsLoop: return "rows_loop";
    case SmPath::Columns: return "columns";
    case SmPath::Strided: return "strided";
  }
  return "?";
}

bool has_kernel(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}

void launch(const SmLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  switch (L.dtype) {
    case DType::Float32: return detail::launch_typed<float>(L, st);
    case DType::Float64: return detail::launch_typed<double>(L, st);
    case DType::Float16: return detail::launch_typed<kernels::f16>(L, st);
    case DType::BFloat16: return detail::launch_typed<kernels::bf16>(L, st);
    default: break;
  }
  throw Unsupported(std::string("softmax: no kernel for ") + dtype_name(L.dtype));
}

}  // namespace baracuda::softmax
