// Runtime (op, dtype) -> the gumbel-softmax / sparsemax launchers (gumbel_<dtype>.cu,
// sparsemax_<dtype>.cu), and the gumbel_noise kernel.
#include <cuda_runtime.h>

#include "common/dtype_traits.cuh"
#include "softmax/gumbel.cuh"
#include "softmax/rowops_launch.h"

namespace baracuda::softmax {
namespace rowops {
template <class T> void gumbel_launch(const RowOpLaunch&, cudaStream_t);
template <class T> void sparsemax_launch(const RowOpLaunch&, cudaStream_t);
extern template void gumbel_launch<float>(const RowOpLaunch&, cudaStream_t);
extern template void gumbel_launch<double>(const RowOpLaunch&, cudaStream_t);
extern template void gumbel_launch<kernels::f16>(const RowOpLaunch&, cudaStream_t);
extern template void gumbel_launch<kernels::bf16>(const RowOpLaunch&, cudaStream_t);
}  // namespace rowops

const char* rowop_path_name(RowPath p) {
  switch (p) {
    case RowPath::Warp: return "rows_warp";
    case RowPath::Block: return "rows_block";
    case RowPath::Global: return "rows_global";
    case RowPath::Elementwise: return "elementwise";
  }
  return "?";
}

namespace {
template <class C> void noise_launch(const RowOpLaunch& L, cudaStream_t st) {
  const rowops::Geo g = rowops::geo_of(L);
  const int64_t quads = (L.numel + 3) / 4;
  rowops::gumbel_noise_kernel<C><<<rowops::grid_of((quads + 255) / 256), 256, 0, st>>>(g, static_cast<C*>(L.out), L.numel,
                                                                                      L.seed, L.offset);
  check_launch("gumbel_noise");
}
template <class F> void by_dtype(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f(kernels::TypeTag<float>{});
    case DType::Float64: return f(kernels::TypeTag<double>{});
    case DType::Float16: return f(kernels::TypeTag<kernels::f16>{});
    case DType::BFloat16: return f(kernels::TypeTag<kernels::bf16>{});
    default: break;
  }
  throw Unsupported(std::string(op) + ": no kernel for " + dtype_name(t));
}
}  // namespace

void launch_rowop(const RowOpLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  switch (L.op) {
    case RowOp::GumbelNoise:
      if (L.dtype == DType::Float64) return noise_launch<double>(L, st);
      if (L.dtype == DType::Float32) return noise_launch<float>(L, st);
      throw Unsupported(std::string("gumbel_noise: no kernel for ") + dtype_name(L.dtype));
    case RowOp::GumbelSoftmax:
    case RowOp::GumbelSoftmaxBackward:
      return by_dtype(L.dtype, "gumbel_softmax", [&](auto tag) {
        using T = typename decltype(tag)::type;
        rowops::gumbel_launch<T>(L, st);
      });
    case RowOp::Sparsemax:
    case RowOp::SparsemaxBackward:
      return by_dtype(L.dtype, "sparsemax", [&](auto tag) {
        using T = typename decltype(tag)::type;
        rowops::sparsemax_launch<T>(L, st);
      });
  }
}

}  // namespace baracuda::softmax
