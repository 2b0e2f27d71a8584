// Row-structured losses (cosine embedding, multi margin, multilabel margin, multilabel soft margin,
// triplet margin) for f16 storage.
#include "loss/row_kernels.cuh"

namespace baracuda::loss::detail {
template void row_launch_typed<kernels::f16>(const RowLaunch&, cudaStream_t);
}  // namespace baracuda::loss::detail
