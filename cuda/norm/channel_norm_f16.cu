// GroupNorm / InstanceNorm / BatchNorm launchers for f16.
#include "norm/channel_norm.cuh"

BARACUDA_CHAN_NORM_INSTANTIATE(baracuda::kernels::f16)
