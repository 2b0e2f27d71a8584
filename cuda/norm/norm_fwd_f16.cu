// RMSNorm / LayerNorm fwd launchers for f16.
#include "norm/fwd_cluster.cuh"

using baracuda::kernels::f16;
BARACUDA_NORM_INSTANTIATE_FWD(f16)
BARACUDA_NORM_INSTANTIATE_FWD_CLUSTER(f16)
