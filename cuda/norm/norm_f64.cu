// RMSNorm / LayerNorm launchers (forward and backward) for f64.
#include "norm/kernels.cuh"


BARACUDA_NORM_INSTANTIATE(double)
