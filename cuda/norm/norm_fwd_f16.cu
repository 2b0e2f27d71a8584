// RMSNorm / LayerNorm fwd launchers for f16.
#include "norm/kernels.cuh"

using baracuda::kernels::f16;
BARACUDA_NORM_INSTANTIATE_FWD(f16)
