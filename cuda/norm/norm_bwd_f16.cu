// RMSNorm / LayerNorm bwd launchers for f16.
#include "norm/fwd_cluster.cuh"

using baracuda::kernels::f16;
BARACUDA_NORM_INSTANTIATE_BWD(f16)
BARACUDA_NORM_INSTANTIATE_BWD_CLUSTER(f16)
