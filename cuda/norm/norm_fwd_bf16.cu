// RMSNorm / LayerNorm fwd launchers for bf16.
#include "norm/fwd_cluster.cuh"

using baracuda::kernels::bf16;
BARACUDA_NORM_INSTANTIATE_FWD(bf16)
BARACUDA_NORM_INSTANTIATE_FWD_CLUSTER(bf16)
