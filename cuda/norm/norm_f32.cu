// RMSNorm / LayerNorm launchers (forward and backward) for f32.
#include "norm/kernels.cuh"


BARACUDA_NORM_INSTANTIATE(float)
