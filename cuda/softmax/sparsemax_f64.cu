// sparsemax forward / backward kernels (sparsemax.cuh) for f64: every path.
#include "softmax/sparsemax.cuh"

namespace baracuda::softmax::rowops {
template void sparsemax_launch<double>(const RowOpLaunch&, cudaStream_t);
}  // namespace baracuda::softmax::rowops
