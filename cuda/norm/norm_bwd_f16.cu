// RMSNorm / LayerNorm bwd launchers for f16.
#include "norm/kernels.cuh"

using baracuda::kernels::f16;
BARACUDA_NORM_INSTANTIATE_BWD(f16)
