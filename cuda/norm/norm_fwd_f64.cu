// RMSNorm / LayerNorm fwd launchers for f64.
#include "norm/fwd_cluster.cuh"

BARACUDA_NORM_INSTANTIATE_FWD(double)
BARACUDA_NORM_INSTANTIATE_FWD_CLUSTER(double)
