// sparsemax forward / backward kernels (sparsemax.cuh) for f16: every path.
#include "softmax/sparsemax.cuh"

namespace baracuda::softmax::rowops {
template void sparsemax_launch<kernels::f16>(const RowOpLaunch&, cudaStream_t);
}  // namespace baracuda::softmax::rowops
