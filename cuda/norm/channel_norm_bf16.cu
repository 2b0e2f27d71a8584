// GroupNorm / InstanceNorm / BatchNorm launchers for bf16.
#include "norm/channel_norm.cuh"

BARACUDA_CHAN_NORM_INSTANTIATE(baracuda::kernels::bf16)
