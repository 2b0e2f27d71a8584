// RMSNorm / LayerNorm bwd launchers for f64.
#include "norm/fwd_cluster.cuh"

BARACUDA_NORM_INSTANTIATE_BWD(double)
BARACUDA_NORM_INSTANTIATE_BWD_CLUSTER(double)
