// GroupNorm / InstanceNorm / BatchNorm launchers for f32.
#include "norm/channel_norm.cuh"

BARACUDA_CHAN_NORM_INSTANTIATE(float)
