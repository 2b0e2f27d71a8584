// RMSNorm / LayerNorm fwd launchers for f64.
#include "norm/kernels.cuh"

BARACUDA_NORM_INSTANTIATE_FWD(double)
