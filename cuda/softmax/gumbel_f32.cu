// gumbel_softmax forward / backward kernels (gumbel.cuh) for f32: every path.
#include "softmax/gumbel.cuh"

namespace baracuda::softmax::rowops {
template void gumbel_launch<float>(const RowOpLaunch&, cudaStream_t);
}  // namespace baracuda::softmax::rowops
