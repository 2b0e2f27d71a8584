// RMSNorm / LayerNorm bwd launchers for f32.
#include "norm/fwd_cluster.cuh"

BARACUDA_NORM_INSTANTIATE_BWD(float)
BARACUDA_NORM_INSTANTIATE_BWD_CLUSTER(float)
