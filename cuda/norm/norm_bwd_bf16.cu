// RMSNorm / LayerNorm bwd launchers for bf16.
#include "norm/kernels.cuh"

using baracuda::kernels::bf16;
BARACUDA_NORM_INSTANTIATE_BWD(bf16)
