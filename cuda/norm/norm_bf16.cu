// RMSNorm / LayerNorm launchers (forward and backward) for bf16.
#include "norm/kernels.cuh"

using baracuda::kernels::bf16;
BARACUDA_NORM_INSTANTIATE(bf16)
