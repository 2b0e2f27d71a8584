// RMSNorm / LayerNorm fwd launchers for f32.
#include "norm/fwd_cluster.cuh"

BARACUDA_NORM_INSTANTIATE_FWD(float)
BARACUDA_NORM_INSTANTIATE_FWD_CLUSTER(float)
