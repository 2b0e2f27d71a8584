// argmax / argmin of integer inputs: (value, index) pairs; ties take the first index. Output
// int64 or int32.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {

void launch_arg_int(const RedLaunch& L, void* stream) { launch_arg_group<IntInputs>(L, stream); }

}  // namespace baracuda::reduction
