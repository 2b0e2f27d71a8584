// sparsemax forward / backward kernels (sparsemax.cuh) for f32: every path.
#include "softmax/sparsemax.cuh"

namespace baracuda::softmax::rowops {
template void sparsemax_launch<float>(const RowOpLaunch&, cudaStream_t);
}  // namespace baracuda::softmax::rowops
