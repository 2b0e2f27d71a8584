// GroupNorm / InstanceNorm / BatchNorm launchers for f64.
#include "norm/channel_norm.cuh"

BARACUDA_CHAN_NORM_INSTANTIATE(double)
