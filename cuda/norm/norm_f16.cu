// RMSNorm / LayerNorm launchers (forward and backward) for f16.
#include "norm/kernels.cuh"

using baracuda::kernels::f16;
BARACUDA_NORM_INSTANTIATE(f16)
