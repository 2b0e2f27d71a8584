// RMSNorm / LayerNorm bwd launchers for bf16.
#include "norm/fwd_cluster.cuh"

using baracuda::kernels::bf16;
BARACUDA_NORM_INSTANTIATE_BWD(bf16)
BARACUDA_NORM_INSTANTIATE_BWD_CLUSTER(bf16)
