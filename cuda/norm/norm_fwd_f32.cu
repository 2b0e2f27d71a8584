// RMSNorm / LayerNorm fwd launchers for f32.
#include "norm/kernels.cuh"

BARACUDA_NORM_INSTANTIATE_FWD(float)
